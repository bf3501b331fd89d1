// A decode subgroup's schedule with a claimed end (DecodeVariant::claims): its own steps base, base +
// stride, ... below own_end, then steps of [claim_first, claim_end), `step` keys each, claimed one at
// a time from its head group's counter (split_arrivals[claims_at], which the merging workgroup leaves
// at zero), so that the splits that stream faster take more of the end. A claim is asked (lane 0's
// atomic) a step before its loads are issued and read (a shuffle) when they are: the atomic's round
// trip overlaps a step's arithmetic.
const uint CLAIM_NONE = 0x80000000u;  // past every key, and far from wrapping when a tile's offset is added

struct ClaimSchedule {
  uint claims_at, claim_first, claim_end, step, own_end, stride;
};

// The claims counter of batch b's head group: after every head group's arrival counter.
uint claim_counter(uint b) {
  return gl_NumWorkGroups.y * gl_NumWorkGroups.z + b * gl_NumWorkGroups.y + gl_WorkGroupID.y;
}

// claim_first: the end's first step, at or before its first key (the kernel masks the keys before).
ClaimSchedule claim_schedule(uint b, uint claim_first, uint claim_end, uint step, uint own_end, uint stride) {
  return ClaimSchedule(claim_counter(b), claim_first, claim_end, step, own_end, stride);
}

uint claim_ask(ClaimSchedule c) {
  uint asked = 0u;
  if (gl_SubgroupInvocationID == 0u) asked = atomicAdd(split_arrivals[c.claims_at], 1u);
  return asked;
}

uint claim_read(ClaimSchedule c, uint asked) {
  const uint at = c.claim_first + subgroupShuffle(asked, 0u) * c.step;
  return at < c.claim_end ? at : CLAIM_NONE;
}

// From the subgroup's first own step `base`: the first step and the one after it (next), each with
// whether it is claimed; the first claims are awaited here.
void claim_start(ClaimSchedule c, inout uint base, out bool claimed, out uint next, out bool next_claimed) {
  claimed = base >= c.own_end;
  if (claimed) base = claim_read(c, claim_ask(c));
  next_claimed = claimed || base + c.stride >= c.own_end;
  next = !next_claimed ? base + c.stride : base == CLAIM_NONE ? CLAIM_NONE : claim_read(c, claim_ask(c));
}

// As a step's loads of `next` are issued: whether the step after next is claimed, and if so its claim
// asked.
bool claim_after(ClaimSchedule c, uint next, bool next_claimed, inout uint asked) {
  const bool after_claimed = next_claimed || next + c.stride >= c.own_end;
  if (after_claimed && next != CLAIM_NONE) asked = claim_ask(c);
  return after_claimed;
}

// At a step's end: next becomes the step, and the one after it is known.
void claim_advance(ClaimSchedule c, inout uint base, inout bool claimed, inout uint next, inout bool next_claimed,
                   bool after_claimed, uint asked) {
  base = next;
  claimed = next_claimed;
  next = !after_claimed ? next + c.stride : next == CLAIM_NONE ? CLAIM_NONE : claim_read(c, asked);
  next_claimed = after_claimed;
}
