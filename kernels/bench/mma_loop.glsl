// Back-to-back 16x16x16 f16 -> f32 cooperative-matrix products on operands held in registers: the
// device's MMA ceiling. Four independent accumulators keep the tensor pipes busy.
#define MMA_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MMA_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

void mma_loop(uint iterations, uint out_offset) {
  MMA_A a, b;
  coopMatLoadNV(a, operands, 0u, 16u, false);
  coopMatLoadNV(b, operands, 256u, 16u, false);
  MMA_C c0 = MMA_C(0.0), c1 = MMA_C(0.0), c2 = MMA_C(0.0), c3 = MMA_C(0.0);
  for (uint i = 0u; i < iterations; ++i) {
    c0 = coopMatMulAddNV(a, b, c0);
    c1 = coopMatMulAddNV(a, b, c1);
    c2 = coopMatMulAddNV(a, b, c2);
    c3 = coopMatMulAddNV(a, b, c3);
  }
  // Four stores rather than one sum: Debian's spirv-opt crashes folding adds of cooperative matrices.
  coopMatStoreNV(c0, result, out_offset, 16u, false);
  coopMatStoreNV(c1, result, out_offset + 256u, 16u, false);
  coopMatStoreNV(c2, result, out_offset + 512u, 16u, false);
  coopMatStoreNV(c3, result, out_offset + 768u, 16u, false);
}
