//! requires: flashattention/common.glsl
// Merges the Split-K partials of one output row (batch, query head, token): split s wrote an
// unnormalised output relative to its own running max m_s (log2 domain) and its sum l_s, at row
// `row0 + s`. Splits that saw no key have l_s = 0 and weigh nothing.
float splitk_merge(uint row0, uint n_splits, uint d) {
  float m_max = NEG_BIG;
  for (uint s = 0u; s < n_splits; ++s) m_max = max(m_max, partial_ml[row0 + s].x);
  float o = 0.0, l = 0.0;
  for (uint s = 0u; s < n_splits; ++s) {
    const vec2 ml = partial_ml[row0 + s];
    const float w = exp2(ml.x - m_max);
    l += ml.y * w;
    o += partial_o[(row0 + s) * HEAD_DIM + d] * w;
  }
  return l > 0.0 ? o / l : 0.0;
}
