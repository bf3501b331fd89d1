//! requires: flashattention/common.glsl
// Merges the Split-K partials of SPLITK_ELEMS output elements, rows of VALUE_DIM: split s of row
// `row` wrote an unnormalised output relative to its own running max m_s (log2 domain) and its sum
// l_s, at partial row `row0 + row * n_splits + s`. Splits that saw no key have l_s = 0 and weigh
// nothing. Each invocation merges elements splitk_index(r), r < SPLITK_PER_INVOCATION; each merged
// output is relative to the largest m_s, with sum l (normalise with fa_output).
//
// Every load of SPLITK_BATCH splits, for all of an invocation's elements, is issued before any is
// folded: the merge sits on the critical path of a fused decode call, and a fold that waited for
// each split's load, or each element's, would wait for memory that many times.
const uint SPLITK_PER_INVOCATION = (SPLITK_ELEMS + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
const uint SPLITK_BATCH = 16u;

uint splitk_index(uint r) { return gl_LocalInvocationIndex + r * WORKGROUP_SIZE; }

void splitk_merge(uint row0, uint n_splits, out float o[SPLITK_PER_INVOCATION], out float m[SPLITK_PER_INVOCATION],
                  out float l[SPLITK_PER_INVOCATION]) {
  [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {
    m[r] = NEG_BIG;
    l[r] = 0.0;
    o[r] = 0.0;
  }
  for (uint s0 = 0u; s0 < n_splits; s0 += SPLITK_BATCH) {
    vec2 ml[SPLITK_PER_INVOCATION][SPLITK_BATCH];
    float po[SPLITK_PER_INVOCATION][SPLITK_BATCH];
    [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {
      const uint i = splitk_index(r);
      [[unroll]] for (uint j = 0u; j < SPLITK_BATCH; ++j) {
        ml[r][j] = vec2(NEG_BIG, 0.0);
        po[r][j] = 0.0;
        if (i < SPLITK_ELEMS && s0 + j < n_splits) {
          const uint row = row0 + (i / VALUE_DIM) * n_splits + s0 + j;
          ml[r][j] = partial_ml[row];
          po[r][j] = partial_o[row * VALUE_DIM + i % VALUE_DIM];
        }
      }
    }
    [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {
      [[unroll]] for (uint j = 0u; j < SPLITK_BATCH; ++j) {
        if (s0 + j < n_splits) softmax_fold(m[r], l[r], o[r], ml[r][j].x, ml[r][j].y, po[r][j]);
      }
    }
  }
}
