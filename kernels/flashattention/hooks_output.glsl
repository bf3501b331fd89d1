//! requires: flashattention/hooks.glsl
// The output's side of the hook points.

// The softmax denominator of a row accumulated relative to the log2-domain maximum m with sum l, as
// l_d * 2^m_d; a sink logit joins it (and nothing else). Keys a row did not see count for nothing:
// its maximum is still NEG_BIG (decode counts hidden keys at NEG_BIG in l rather than branching per
// key; any visible key's weight makes theirs 0).
void fa_denominator(float m, float l, uint b, uint h, out float m_d, out float l_d) {
  const float l_seen = softmax_hidden(m) ? 0.0 : l;
  m_d = m;
  l_d = l_seen;
  if (FA_SINK_HOOKED) {
    const float sink_logit = fa_sink(b, h) * LOG2E;
    const float sink = softmax_hidden(sink_logit) ? NEG_BIG : sink_logit;
    m_d = max(m, sink);
    l_d = l_seen * exp2(m - m_d) + exp2(sink - m_d);
  }
}

// The factor that turns the output accumulated relative to m into the normalised output. A row
// whose denominator is 0 (it saw no visible key, and no sink) gives 0, never NaN.
float fa_norm_scale(float m, float l, uint b, uint h) {
  float m_d, l_d;
  fa_denominator(m, l, b, h, m_d, l_d);
  return exp2(m - m_d) * softmax_inverse(l_d);
}

// The row's log-sum-exp (natural log) of its scaled, modified scores, a sink included: what a merge
// of partial results weighs the row's output by. -inf for a row whose denominator is 0.
float fa_lse(float m, float l, uint b, uint h) {
  float m_d, l_d;
  fa_denominator(m, l, b, h, m_d, l_d);
  return softmax_lse(m_d, l_d);
}

// Output element d of query position q: normalised, then through the epilogue hooks.
float fa_output(float o, float m, float l, uint b, uint h, uint q, uint d) {
  return fa_epilogue(o * fa_norm_scale(m, l, b, h), b, h, q, d);
}
