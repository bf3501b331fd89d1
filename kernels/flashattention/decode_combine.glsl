//! requires: flashattention/common.glsl
// Merges the DECODE_PARTS per-subgroup partials of one (head, dimension) held in shared memory.
// `o_unnorm` is relative to `m_all`; the normalised output is o_unnorm / l_all.
void decode_combine(uint h, uint d, out float o_unnorm, out float m_all, out float l_all) {
  float m_max = NEG_BIG;
  for (uint w = 0u; w < DECODE_PARTS; ++w) m_max = max(m_max, part_m[w * DECODE_HEADS + h]);
  float o_sum = 0.0, l_sum = 0.0;
  for (uint w = 0u; w < DECODE_PARTS; ++w) {
    const float weight = part_l[w * DECODE_HEADS + h] * exp2(part_m[w * DECODE_HEADS + h] - m_max);
    l_sum += weight;
    o_sum += weight * PART_O_READ((w * DECODE_HEADS + h) * VALUE_DIM + d);
  }
  o_unnorm = o_sum;
  m_all = m_max;
  l_all = l_sum;
}
