// ALiBi (stages/modifiers/AlibiStage.h): each head's logits fall linearly with the distance between
// key and query, s + slope_h * (k - q). Positions below 2^24 are exact in f32.

float alibi_score(float s, uint b, uint h, uint q, uint k) { return s + alibi_slopes[h] * (float(k) - float(q)); }
