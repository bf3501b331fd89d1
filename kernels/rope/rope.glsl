// Rotary position embedding.
// rope_inv_freq[f] holds inv_freq[f] / (2 pi) ("turns per position", computed in double on the host
// with any frequency scaling applied), so the angle at position p is 2 pi * fract(p * turns): reduced
// to [-pi, pi] before sin/cos, whose precision GLSL only promises on that range. The remaining error is
// that of the f32 product, about p * inv_freq * 2^-24 radians.
// ROPE_DIMS: rotated dimensions (the rest pass through); ROPE_INTERLEAVED: 1 pairs (2f, 2f+1) as in
// GPT-J, 0 pairs (f, f + ROPE_DIMS/2) as in Llama and NeoX.

// pc.rope_scale multiplies the rotated dimensions (YaRN's attention factor; 1 otherwise).
vec2 rope_cos_sin(uint pos, uint f) {
  const float turns = fract(float(pos) * rope_inv_freq[f]);
  const float angle = (turns > 0.5 ? turns - 1.0 : turns) * 6.283185307179586;
  return vec2(cos(angle), sin(angle)) * pc.rope_scale;
}

// For dimension d < ROPE_DIMS: its frequency index, its partner, and whether d is the pair's first.
void rope_pair(uint d, out uint f, out uint partner, out bool first) {
#if ROPE_INTERLEAVED
  f = d >> 1u;
  partner = d ^ 1u;
  first = (d & 1u) == 0u;
#else
  const uint half_dims = ROPE_DIMS / 2u;
  first = d < half_dims;
  f = first ? d : d - half_dims;
  partner = first ? d + half_dims : d - half_dims;
#endif
}

// The rotated value of dimension d given its own value x_d and its partner's x_p.
float rope_rotate(uint d, uint pos, float x_d, float x_p) {
  uint f, partner;
  bool first;
  rope_pair(d, f, partner, first);
  const vec2 cs = rope_cos_sin(pos, f);
  return first ? x_d * cs.x - x_p * cs.y : x_d * cs.x + x_p * cs.y;
}

uint rope_partner(uint d) {
  uint f, partner;
  bool first;
  rope_pair(d, f, partner, first);
  return partner;
}
