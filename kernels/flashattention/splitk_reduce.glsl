//! requires: flashattention/common.glsl
// Merges the Split-K partials of one output row (batch, query head, token): split s wrote an
// unnormalised output relative to its own running max m_s (log2 domain) and its sum l_s, at row
// `row0 + s`. Splits that saw no key have l_s = 0 and weigh nothing. The merged output is relative
// to the largest m_s, with sum l (normalise with fa_output).
void splitk_merge(uint row0, uint n_splits, uint d, out float o, out float m, out float l) {
  m = NEG_BIG;
  l = 0.0;
  o = 0.0;
  for (uint s = 0u; s < n_splits; ++s) {
    const vec2 ml = partial_ml[row0 + s];
    softmax_fold(m, l, o, ml.x, ml.y, partial_o[(row0 + s) * VALUE_DIM + d]);
  }
}

#ifdef SPLITK_ELEMS
// The merge of SPLITK_ELEMS output elements (rows of VALUE_DIM, partial row `row0 + row * n_splits +
// s`) where the workgroup has fewer invocations than elements, as a fused decode call's last workgroup
// may (D80 and D128 with 4 heads on 256 invocations): each invocation merges elements splitk_index(r),
// r < SPLITK_PER_INVOCATION. The loads of a batch of splits, for all of an invocation's elements, are
// issued before any is folded: that merge is on the critical path of the call, and a fold that
// waited for each split's load and each element's would wait for memory that many times. Every load is
// made (past the last split or element, the last one again): loads under conditions were slower on
// the H200 (docs/performance.md, "The Split-K merge's loads"). Batches of SPLITK_BATCH splits, or one
// of SPLITK_FEW where there are that few, so that they do not read the last split many times over
// (DecodeVariant::kMergeBatch and kMergeBatchFew, which its loop-pass count uses too).
const uint SPLITK_PER_INVOCATION = (SPLITK_ELEMS + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;

uint splitk_index(uint r) { return gl_LocalInvocationIndex + r * WORKGROUP_SIZE; }

#if SPLITK_RAGGED
// Where invocations' element counts differ, those past the last element load (as every invocation
// does) but fold nothing, and a batch folds at its maximum: one exponential per state, none waiting
// on another, where folding one state at a time takes two in a chain. D80 decode at kv 65536 took 1
// us less; the same fold where every invocation has whole elements (D128) cost 3.7 us
// (docs/performance.md, "The merge's exponentials").
#define SPLITK_FOLD(BATCH)                                                                          \
  [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {                                    \
    if (splitk_index(r) < SPLITK_ELEMS) {                                                           \
      float top = m[r];                                                                             \
      [[unroll]] for (uint j = 0u; j < (BATCH); ++j) top = s0 + j < n_splits ? max(top, ml[r][j].x) : top; \
      const float a = exp2(m[r] - top);                                                             \
      l[r] *= a;                                                                                    \
      o[r] *= a;                                                                                    \
      m[r] = top;                                                                                   \
      [[unroll]] for (uint j = 0u; j < (BATCH); ++j) {                                              \
        if (s0 + j < n_splits) {                                                                    \
          const float w = exp2(ml[r][j].x - top);                                                   \
          l[r] += ml[r][j].y * w;                                                                   \
          o[r] += po[r][j] * w;                                                                     \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }
#else
#define SPLITK_FOLD(BATCH)                                                                          \
  [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {                                    \
    [[unroll]] for (uint j = 0u; j < (BATCH); ++j) {                                                \
      if (s0 + j < n_splits) softmax_fold(m[r], l[r], o[r], ml[r][j].x, ml[r][j].y, po[r][j]);      \
    }                                                                                               \
  }
#endif

#define SPLITK_MERGE_BATCHES(BATCH)                                                                   \
  for (uint s0 = 0u; s0 < n_splits; s0 += (BATCH)) {                                                \
    vec2 ml[SPLITK_PER_INVOCATION][BATCH];                                                          \
    float po[SPLITK_PER_INVOCATION][BATCH];                                                         \
    [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {                                  \
      const uint i = min(splitk_index(r), SPLITK_ELEMS - 1u);                                       \
      [[unroll]] for (uint j = 0u; j < (BATCH); ++j) {                                              \
        const uint row = row0 + (i / VALUE_DIM) * n_splits + min(s0 + j, n_splits - 1u);           \
        ml[r][j] = partial_ml[row];                                                                 \
        po[r][j] = partial_o[row * VALUE_DIM + i % VALUE_DIM];                                      \
      }                                                                                             \
    }                                                                                               \
    SPLITK_FOLD(BATCH)                                                                              \
  }

void splitk_merge_batched(uint row0, uint n_splits, out float o[SPLITK_PER_INVOCATION],
                          out float m[SPLITK_PER_INVOCATION], out float l[SPLITK_PER_INVOCATION]) {
  [[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r) {
    m[r] = NEG_BIG;
    l[r] = 0.0;
    o[r] = 0.0;
  }
  if (n_splits <= SPLITK_FEW) {
    SPLITK_MERGE_BATCHES(SPLITK_FEW)
  } else {
    SPLITK_MERGE_BATCHES(SPLITK_BATCH)
  }
}
#endif
