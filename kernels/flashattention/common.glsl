// Definitions every attention kernel shares.

// Running maxima start here: large and finite, so no arithmetic ever sees -inf; a row that sees no
// key keeps l = 0 and yields 0, never NaN.
const float NEG_BIG = -1.0e30;
// Scores are kept in the log2 domain (q is pre-scaled by scale * log2(e)) so exp() becomes exp2().
const float LOG2E = 1.4426950408889634;
const float HALF_MAX = 65504.0;

float clamp_to_half(float x) { return clamp(x, -HALF_MAX, HALF_MAX); }

// Merges two softmax partial states (m, l, and a weight for each side's accumulator).
void merge_weights(float m_a, float m_b, out float m_new, out float w_a, out float w_b) {
  m_new = max(m_a, m_b);
  w_a = exp2(m_a - m_new);
  w_b = exp2(m_b - m_new);
}
