// The prefill probe (FOUNDRY_FA_PREFILL_PROBE, stages/PrefillProbe.h). With FA_PROBE each subgroup
// reads the device's clock at its start and end (comparable across SMs) and its SM's cycle counter
// at every phase boundary, and its elected lane writes one record of PROBE_WORDS words at the end:
//   0 SM id (~0u without GL_NV_shader_sm_builtins)   1 warp slot on the SM
//   2-3 start and 4-5 end on the device clock (low, high)   6 total cycles
//   7.. the cycles of each phase, PROBE_SETUP .. PROBE_BARRIER
// Without FA_PROBE every function here is empty and the kernel is the usual one.
const uint PROBE_SETUP = 0u;    // before the tile loop: Q staged, the first tile found
const uint PROBE_LOADS = 1u;    // K/V fetched from memory and stored into shared memory
const uint PROBE_SCORES = 2u;   // Q K^T products, the scale, masks and row maxima per lane
const uint PROBE_SOFTMAX = 3u;  // row maxima and sums across lanes, the O rescale
const uint PROBE_VALUES = 4u;   // exp2 and the P V products
const uint PROBE_TILE = 5u;     // the rest of a tile (a variant without marks inside its tile)
const uint PROBE_BARRIER = 6u;  // waiting at the workgroup's barriers
const uint PROBE_PHASES = 7u;
const uint PROBE_WORDS = 16u;

#if FA_PROBE
uint probe_cycles[PROBE_PHASES];
uint probe_first, probe_last;
uvec2 probe_start;

void probe_begin() {
  probe_start = clockRealtime2x32EXT();
  probe_first = probe_last = clock2x32ARB().x;
  [[unroll]] for (uint i = 0u; i < PROBE_PHASES; ++i) probe_cycles[i] = 0u;
}

// The cycles since the last mark go to `phase` (32-bit differences: a workgroup runs far less than
// 2^32 cycles).
void probe_mark(uint phase) {
  const uint now = clock2x32ARB().x;
  probe_cycles[phase] += now - probe_last;
  probe_last = now;
}

void probe_end() {
  const uvec2 end = clockRealtime2x32EXT();
  const uint cycles = clock2x32ARB().x - probe_first;
  if (!subgroupElect()) return;
  const uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  const uint at = (wg * PF_SUBGROUPS + gl_SubgroupID) * PROBE_WORDS;
#if FA_PROBE_SM
  probe[at] = gl_SMIDNV;
  probe[at + 1u] = gl_WarpIDNV;
#else
  probe[at] = ~0u;
  probe[at + 1u] = ~0u;
#endif
  probe[at + 2u] = probe_start.x;
  probe[at + 3u] = probe_start.y;
  probe[at + 4u] = end.x;
  probe[at + 5u] = end.y;
  probe[at + 6u] = cycles;
  [[unroll]] for (uint i = 0u; i < PROBE_PHASES; ++i) probe[at + 7u + i] = probe_cycles[i];
}
#else
void probe_begin() {}
void probe_mark(uint phase) {}
void probe_end() {}
#endif
