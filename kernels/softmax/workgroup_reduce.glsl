// Workgroup-wide reduction through shared memory (ref_scratch[WORKGROUP_SIZE], a power of two);
// every invocation gets the result.
float ref_reduce(float value, bool take_max) {
  ref_scratch[gl_LocalInvocationIndex] = value;
  barrier();
  for (uint stride = WORKGROUP_SIZE / 2u; stride > 0u; stride >>= 1u) {
    if (gl_LocalInvocationIndex < stride) {
      const float a = ref_scratch[gl_LocalInvocationIndex], b = ref_scratch[gl_LocalInvocationIndex + stride];
      ref_scratch[gl_LocalInvocationIndex] = take_max ? max(a, b) : a + b;
    }
    barrier();
  }
  const float result = ref_scratch[0];
  barrier();
  return result;
}
