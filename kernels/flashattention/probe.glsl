// The prefill and decode probes (FOUNDRY_FA_PREFILL_PROBE, FOUNDRY_FA_DECODE_PROBE; stages/PrefillProbe.h).
// With FA_PROBE each subgroup reads the device's clock at its start and end (comparable across SMs),
// and its elected lane writes one record of PROBE_WORDS words at the end:
//   0 SM id (~0u without GL_NV_shader_sm_builtins)   1 warp slot on the SM
//   2-3 start and 4-5 end on the device clock (low, high)   6 total cycles
// then, in prefill (probe_mark at every phase boundary, probe_end):
//   7.. the cycles of each phase, PROBE_SETUP .. PROBE_BARRIER
// and in decode (probe_stamp at its milestones, probe_end_stamps), on the device clock:
//   7-8 the keys' stream begun (q staged)   9-10 the stream done (this subgroup's partial in shared
//   memory)   11-12 handed over (the workgroup's partials written and its arrival counted)
//   13 1 where this workgroup merged its head group's splits
// Without FA_PROBE every function here is empty and the kernel is the usual one.
const uint PROBE_SETUP = 0u;    // before the tile loop: Q staged, the first tile found
const uint PROBE_LOADS = 1u;    // K/V fetched from memory and stored into shared memory
const uint PROBE_SCORES = 2u;   // Q K^T products, the scale, masks and row maxima per lane
const uint PROBE_SOFTMAX = 3u;  // row maxima and sums across lanes, the O rescale
const uint PROBE_VALUES = 4u;   // exp2 and the P V products
const uint PROBE_TILE = 5u;     // the rest of a tile (a variant without marks inside its tile)
const uint PROBE_BARRIER = 6u;  // waiting at the workgroup's barriers
const uint PROBE_PHASES = 7u;
const uint PROBE_STREAM_BEGUN = 0u, PROBE_STREAM_DONE = 1u, PROBE_HANDED_OVER = 2u;  // decode's stamps
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

// Words 0-6 of this subgroup's record, which starts at word `at`.
void probe_head(uint at, uvec2 end, uint cycles) {
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
}

uint probe_record_at() {
  const uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  return (wg * gl_NumSubgroups + gl_SubgroupID) * PROBE_WORDS;
}

void probe_end() {
  const uvec2 end = clockRealtime2x32EXT();
  const uint cycles = clock2x32ARB().x - probe_first;
  if (!subgroupElect()) return;
  const uint at = probe_record_at();
  probe_head(at, end, cycles);
  [[unroll]] for (uint i = 0u; i < PROBE_PHASES; ++i) probe[at + 7u + i] = probe_cycles[i];
}

// Decode's milestones: PROBE_STREAM_BEGUN, PROBE_STREAM_DONE, PROBE_HANDED_OVER.
uvec2 probe_stamps[3];
void probe_stamp(uint i) { probe_stamps[i] = clockRealtime2x32EXT(); }

void probe_end_stamps(bool merged) {
  const uvec2 end = clockRealtime2x32EXT();
  const uint cycles = clock2x32ARB().x - probe_first;
  if (!subgroupElect()) return;
  const uint at = probe_record_at();
  probe_head(at, end, cycles);
  [[unroll]] for (uint i = 0u; i < 3u; ++i) {
    probe[at + 7u + 2u * i] = probe_stamps[i].x;
    probe[at + 8u + 2u * i] = probe_stamps[i].y;
  }
  probe[at + 13u] = merged ? 1u : 0u;
}
#else
void probe_begin() {}
void probe_mark(uint phase) {}
void probe_end() {}
void probe_stamp(uint i) {}
void probe_end_stamps(bool merged) {}
#endif
