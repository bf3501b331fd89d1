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
