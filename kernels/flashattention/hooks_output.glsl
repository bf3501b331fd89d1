//! requires: flashattention/hooks.glsl
// The output's side of the hook points.

// The factor that turns an output accumulated relative to the log2-domain maximum m, with sum l, into
// the normalised output; a sink logit joins the denominator only. A row that saw no visible key gives
// 0: its maximum is still NEG_BIG (decode counts hidden keys at NEG_BIG in l rather than branching
// per key; any visible key's weight makes theirs 0).
float fa_norm_scale(float m, float l, uint b, uint h) {
  const float l_seen = m > 0.5 * NEG_BIG ? l : 0.0;
  if (FA_SINK_HOOKED) {
    const float sink = max(fa_sink(b, h) * LOG2E, NEG_BIG);
    const float m_new = max(m, sink);
    const float w = exp2(m - m_new);
    return w / (l_seen * w + exp2(sink - m_new));
  }
  return l_seen > 0.0 ? 1.0 / l_seen : 0.0;
}

// Output element d of query position q: normalised, then through the epilogue hooks.
float fa_output(float o, float m, float l, uint b, uint h, uint q, uint d) {
  return fa_epilogue(o * fa_norm_scale(m, l, b, h), b, h, q, d);
}
