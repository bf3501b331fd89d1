// Reads a workgroup's contiguous share of a buffer of rows of 128 f16 through workgroup-scope coopmat2
// tensor loads (what the driver issues for them, not loads through registers the kernel holds): tiles of
// 64 rows, READ_LOADS of them loaded before one product folds them. The product's sum is written only
// where the host passes a magic value (pc.magic), so the compiler cannot drop the loads.
#define RC_K coopmat<float16_t, gl_ScopeWorkgroup, 128, 64, gl_MatrixUseB>
#define RC_Q coopmat<float16_t, gl_ScopeWorkgroup, 64, 128, gl_MatrixUseA>
#define RC_S coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>

tensorLayoutNV<2, gl_CooperativeMatrixClampModeUndefinedNV> rc_rows(uint t, uint rows) {
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeUndefinedNV> l =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeUndefinedNV);
  l = setTensorLayoutDimensionNV(l, rows, 128u);
  l = setTensorLayoutStrideNV(l, 128u, 1u);
  return sliceTensorLayoutNV(l, t, 64u, 0u, 128u);
}

// rows: a multiple of 64 * READ_LOADS (the host's buffers are whole MiB: 4096 rows each), so whole
// groups of tiles cover every share and every row is read.
void read_coopmat2(uint rows) {
  const uint group = READ_LOADS * 64u;
  const uint share = (rows / group + gl_NumWorkGroups.x - 1u) / gl_NumWorkGroups.x * group;
  const uint begin = gl_WorkGroupID.x * share, end = min(begin + share, rows);
  const RC_Q q = RC_Q(float16_t(1.0));
  RC_S acc = RC_S(0.0);
  for (uint t = begin; t < end; t += group) {
    RC_K k[READ_LOADS];
    [[unroll]] for (uint i = 0u; i < READ_LOADS; ++i) {
      coopMatLoadTensorNV(k[i], data, 0u, rc_rows(t + i * 64u, rows), createTensorViewNV(2, false, 1, 0));
    }
    [[unroll]] for (uint i = 0u; i < READ_LOADS; ++i) acc = coopMatMulAdd(q, k[i], acc);
  }
  if (pc.magic == 0x9e3779b9u) coopMatStore(acc, sink, 0u, 64u, gl_CooperativeMatrixLayoutRowMajor);
}
