#!/bin/bash
H=$(cd "$(dirname "$0")" && pwd); L=${1:-/tmp/gl3}; mkdir -p $L
( time $H/kda-split-p2 bench --heads 12 --batch 64,128,512 --tokens 1 --check --schedule "auto;2,16,0,4,1,1;2,16,0,8,1,1;2,8,0,4,1,1;2,32,0,4,1,1;3,32,0,2,1,1;2,16,0,4,0,1" --json $L/p12.json ) > $L/bench-p12.log 2>&1
( time $H/kda-split-p2 bench --heads 6,32 --batch 128,512 --tokens 1 --schedule "auto;2,16,0,4,1,1;2,16,0,8,1,1;2,32,0,4,1,1" --json $L/p632.json ) > $L/bench-p632.log 2>&1
echo done > $L/done
