//! requires: common/half.glsl common/finite.glsl
// Definitions every attention kernel shares.

// Running maxima start here: large and finite, so no arithmetic ever sees -inf; a row that sees no
// key keeps l = 0 and yields 0, never NaN.
const float NEG_BIG = -1.0e30;
// Scores are kept in the log2 domain (q is pre-scaled by scale * log2(e)) so exp() becomes exp2().
const float LOG2E = 1.4426950408889634;
const float LN2 = 0.6931471805599453;

// Non-finite inputs follow PyTorch's softmax: a NaN or +Inf score makes its row NaN, a -Inf one
// weighs nothing. Every kernel weighs and normalises through these three, whose tests are written so
// that NaN fails them (a NaN compared is false): a hidden key is one whose score is at or below
// half of NEG_BIG, never "not above" it.
bool softmax_hidden(float s) { return s <= 0.5 * NEG_BIG; }
// The weight exp2(s - m) of a score against the running maximum m; 0 for a hidden key.
float softmax_weight(float s, float m) { return softmax_hidden(s) ? 0.0 : exp2(s - m); }
// 1 / l for a softmax sum; 0 for a row that saw nothing (l = 0), NaN for a NaN sum.
float softmax_inverse(float l) { return l == 0.0 ? 0.0 : 1.0 / l; }
// Kernels that scale q into a narrower code (int8, or f16 over its largest magnitude) would lose a NaN
// or infinity in it: its largest magnitude (magnitude_or_inf) makes the factor their scores are
// multiplied back by NaN instead (scale_or_nan, common/finite.glsl).

// Merges two softmax partial states (m, l, and a weight for each side's accumulator).
void merge_weights(float m_a, float m_b, out float m_new, out float w_a, out float w_b) {
  m_new = max(m_a, m_b);
  w_a = exp2(m_a - m_new);
  w_b = exp2(m_b - m_new);
}

// Folds one softmax state (its log2-domain maximum m_s, its sum l_s and an accumulator o_s relative
// to m_s) into a running one (m, l, o): the one merge of partial softmaxes, for Split-K partials and
// for whole attention results weighed by their log-sum-exps. A state with l_s = 0 weighs nothing.
void softmax_fold(inout float m, inout float l, inout float o, float m_s, float l_s, float o_s) {
  float m_new, w, w_s;
  merge_weights(m, m_s, m_new, w, w_s);
  l = l * w + l_s * w_s;
  o = o * w + o_s * w_s;
  m = m_new;
}

// The natural-log log-sum-exp of a softmax denominator l * 2^m; -inf where it is 0 (a row that saw
// nothing: no number could stand for it, and a merge gives such a part no weight).
float softmax_lse(float m, float l) { return l == 0.0 ? uintBitsToFloat(0xff800000u) : (m + log2(l)) * LN2; }

// The log2-domain state (m, l) of a finished result with log-sum-exp `lse`: l = 1 relative to
// m = lse / ln 2; a result with lse -inf (a row that saw nothing) gets l = 0, one with lse NaN stays NaN.
vec2 softmax_state_of_lse(float lse) {
  const float m = lse * LOG2E;
  return softmax_hidden(m) ? vec2(NEG_BIG, 0.0) : vec2(m, 1.0);
}
