#!/usr/bin/env bash
# Sourced by the device scripts that need the carried wheels but not pycuda's build: .whlgpu (renamed .whl,
# as run_checks_call.sh does) or .whl installed into /tmp/site, once per set of wheels, as
# bench/device/gpu_env.sh installs them without its pycuda build (minutes); PYTHONPATH and PATH set to
# them and the checkout. Returns 1 where pip fails.
if [ -d .whlgpu ]; then rm -rf .whl; mv .whlgpu .whl; fi
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
# shellcheck disable=SC2012
_stamp=$(ls -l .whl/*.whl 2>/dev/null | md5sum | cut -c1-16)
if [ -d .whl ] && [ "$(cat /tmp/site/.regraph-wheels 2>/dev/null)" != "$_stamp" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
  echo "$_stamp" > /tmp/site/.regraph-wheels
fi
