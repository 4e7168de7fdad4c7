# Sourced by the benchmark scripts that run torch (bench_vs_anchors.sh,
# bench_tensor_vs_torch.sh); never by tests or CI.
#
# torch_blas_setup gives torch its proper GEMM kernels where its OpenBLAS
# does not know the CPU, so that a ratio against torch is not measured
# against a fallback. Debian's OpenBLAS 0.3.21 picks its kernels from the
# CPU model when it loads; on a model newer than itself (Intel family 6
# model 207, for one) it runs its generic "Prescott" SSE3 kernels, and
# torch 1.13's Linear layers sgemm at about 33 GFLOPS where the machine
# does 185-215. goddp's engine repairs its own copy of OpenBLAS when it
# starts (tensor.BLASCore); torch does not.
#
# It reads the CPU's vendor, family, model and flags from /proc/cpuinfo
# and asks torch's OpenBLAS which core it picked (openblas_get_corename,
# through ctypes on the libopenblas torch has loaded). When that core is a
# fallback (no AVX2 kernels on an AVX2 CPU, or no AVX-512 kernels on an
# AVX-512 CPU), it times torch's sgemm at n=1024 as it loads and with
# OPENBLAS_CORETYPE set to the CPU's kernel set (SkylakeX for AVX-512,
# Haswell for AVX2), and keeps the faster. A user's OPENBLAS_CORETYPE is
# kept as it is. Afterwards TORCH_PY is the command that runs torch's
# python (an array: env OPENBLAS_CORETYPE=... /usr/bin/python3, or just
# the interpreter), and one line says what was found and chosen.
# Only torch's processes get the variable: goddp's figures stay those a
# user gets by default.
torch_python=${TORCH_PYTHON:-/usr/bin/python3}

# torch_sgemm_gflops [ENV...]: torch's float32 GEMM rate at n=1024 on every
# core (scripts/bench_torch_gemm.py), with ENV set for the process.
torch_sgemm_gflops() {
  env "$@" OMP_NUM_THREADS="$(nproc)" SECS="${TORCH_BLAS_SECS:-1}" "$torch_python" scripts/bench_torch_gemm.py "$(nproc)" 1024,1024,1024 2>/dev/null |
    sed -n 's/.*GFLOPS=\([0-9.]*\).*/\1/p'
}

torch_blas_setup() {
  TORCH_PY=("$torch_python")
  local vendor family model flags want core
  vendor=$(awk -F': *' '/^vendor_id/ {print $2; exit}' /proc/cpuinfo)
  family=$(awk -F': *' '/^cpu family/ {print $2; exit}' /proc/cpuinfo)
  model=$(awk -F': *' '/^model[[:space:]]*:/ {print $2; exit}' /proc/cpuinfo)
  flags=" $(awk -F': *' '/^flags/ {print $2; exit}' /proc/cpuinfo) "
  want=
  if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* && $flags == *" avx512dq "* ]]; then want=SKYLAKEX
  elif [[ $flags == *" avx2 "* && $flags == *" fma "* ]]; then want=HASWELL; fi
  local cpu="$vendor family $family model $model (${want:-no AVX2})"
  if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "torch-blas: cpu $cpu; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is set by the environment and kept, for torch and goddp"
    return 0
  fi
  core=$("$torch_python" - 2>/dev/null <<'PY'
import ctypes, torch  # noqa: F401  (torch loads its BLAS)
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libopenblas" in l})
for p in libs:
    try:
        f = ctypes.CDLL(p).openblas_get_corename
        f.restype = ctypes.c_char_p
        print(f().decode())
        break
    except (OSError, AttributeError):
        pass
PY
)
  if [ -z "$core" ]; then
    echo "torch-blas: cpu $cpu; torch's BLAS is not an OpenBLAS that names its core (or torch is missing): torch runs as it loads"
    return 0
  fi
  local fallback=0
  case "${core,,}" in
    skylakex|cooperlake|sapphirerapids|zen4|zen5) ;;
    haswell|zen|zen2|zen3) [ "$want" = SKYLAKEX ] && fallback=1 ;;
    *) [ -n "$want" ] && fallback=1 ;;
  esac
  if [ "$fallback" = 0 ]; then
    echo "torch-blas: cpu $cpu; torch's OpenBLAS runs its $core kernels, which fit: torch runs as it loads"
    return 0
  fi
  local as_loaded with
  as_loaded=$(torch_sgemm_gflops)
  with=$(torch_sgemm_gflops OPENBLAS_CORETYPE=$want)
  if awk -v a="${as_loaded:-0}" -v b="${with:-0}" 'BEGIN {exit !(b > a)}'; then
    TORCH_PY=(env OPENBLAS_CORETYPE=$want "$torch_python")
    echo "torch-blas: cpu $cpu; torch's OpenBLAS picked $core, a fallback here: torch runs with OPENBLAS_CORETYPE=$want (torch sgemm n=1024: ${as_loaded:-?} GFLOPS as loaded, ${with:-?} with it)"
  else
    echo "torch-blas: cpu $cpu; torch's OpenBLAS picked $core; OPENBLAS_CORETYPE=$want was no faster (torch sgemm n=1024: ${as_loaded:-?} GFLOPS as loaded, ${with:-?} with it): torch runs as it loads"
  fi
}
