// ALiBi (foundry/stages/modifiers/AlibiStage.h): each head's logits fall linearly with the distance between
// key and query, s + slope_h * (k - q); the kernels apply the slope (flashattention/hooks_keys.glsl).

float alibi_slope(uint b, uint h) { return alibi_slopes[h]; }
