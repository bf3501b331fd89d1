#!/usr/bin/env bash
# On the lent GPU machine (carry .device, packed with foundry and foundry_attention_tests): the tensor-core
# decode's parity cases, then int8 D128 kv 65536 batch 1 as planned (V staged in halves on Hopper) against
# FOUNDRY_FA_DECODE_VALUE_HALVES=0, two rounds (docs/performance.md, "V staged in halves").
source .device/env.sh
export PATH=$PWD/.device/bin:$PATH
timeout 80 foundry_attention_tests --gtest_filter='*DecodeTensorCores*:*DecodeVariants*_tc*' --gtest_brief=1 > $OUT/tc.log 2>&1; echo "parity rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests from|Failure" $OUT/tc.log | head -12 | cut -c1-200
for r in 1 2; do
timeout 40 foundry bench --runs 30 --json $OUT/plan-$r.json --shape decode:1:32:8:65536:128+int8 2>&1 | grep -E "us$|rror" | grep -v ceilings | sed "s/^/$r plan: /"
FOUNDRY_FA_DECODE_VALUE_HALVES=0 timeout 40 foundry bench --runs 30 --shape decode:1:32:8:65536:128+int8 2>&1 | grep -E "us$|rror" | grep -v ceilings | sed "s/^/$r whole: /"
done
python3 -c "
import json
d=json.load(open('$OUT/plan-1.json'))
for r in d['results']:
  for k,st in r['statistics'].items(): print(k, dict(st).get('Register Count'), r['rel_error'])
"
