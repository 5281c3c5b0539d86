# The builder script of the flake's host-toolchain derivations (run by /bin/sh).
#
# "Host toolchain" means this machine's compilers and the builder's torch environments,
# outside the Nix store. A Nix build sees neither the caller's environment nor its
# checkout, so where they are comes from a small file written by ci/setup-nix
# (kernelhub_builder.compile.nix_host, host_env_file: the same two places), which names no checkout:
#   <home>/.config/kernelhub/nix-host.env, <home> being what the user database says for
#   the user the build runs as (single-user Nix; HOME is not set in a build),
#   else /etc/kernelhub/nix-host.env (a daemon's build users have no home).
# It sets KERNELHUB_BUILDER_HOMES (every builder home a set-up recorded, latest first;
# older files: KERNELHUB_BUILDER_HOME); it may set CUDA_HOME or CXX. The build takes the
# first home holding the builder Python for its dependencies, and its torch environments.
# The Python is $KERNELHUB_BUILDER_HOME/nix-python/$pythonKey: a venv with only the
# builder's and loader's dependencies, named after them (the derivation passes the key),
# so it is the same for every checkout with those dependencies. The builder's own code
# is the copy in the store ($builderSrc, $loaderSrc), so a change to it rebuilds every
# variant.
set -eu
command=$1
home=$(getent passwd "$(id -u)" | cut -d: -f6 || true)
conf=
for candidate in "${home:-/nonexistent}/.config/kernelhub/nix-host.env" /etc/kernelhub/nix-host.env; do
  if [ -r "$candidate" ]; then conf=$candidate; break; fi
done
if [ -z "$conf" ]; then
  echo "error: no host toolchain for Nix builds: this build runs as uid $(id -u), whose home in the user database is ${home:-(none)}, and neither ${home:-<home>}/.config/kernelhub/nix-host.env nor /etc/kernelhub/nix-host.env exists; run ci/setup-nix in a checkout as that user (it writes the first whatever HOME is), or write the second as root with: python -m kernelhub_builder.compile.nix_build host-setup --project-file kernels.toml --env-file /etc/kernelhub/nix-host.env" >&2
  exit 1
fi
. "$conf"
homes=${KERNELHUB_BUILDER_HOMES:-${KERNELHUB_BUILDER_HOME:-$home/.cache/kernelhub-builder}}
KERNELHUB_BUILDER_HOME=${homes%%:*}
set -f; saved_ifs=$IFS; IFS=:
for candidate in $homes; do
  if [ -f "$candidate/nix-python/$pythonKey/kernelhub-nix-python.json" ]; then
    KERNELHUB_BUILDER_HOME=$candidate; break
  fi
done
IFS=$saved_ifs; set +f
export KERNELHUB_BUILDER_HOME
KERNELHUB_PYTHON="$KERNELHUB_BUILDER_HOME/nix-python/$pythonKey/bin/python"
if [ ! -x "$KERNELHUB_PYTHON" ] || [ ! -f "$KERNELHUB_BUILDER_HOME/nix-python/$pythonKey/kernelhub-nix-python.json" ]; then
  echo "error: no builder Python for these dependencies at $KERNELHUB_BUILDER_HOME/nix-python/$pythonKey; run ci/setup-nix in this checkout (it makes one per set of builder and loader dependencies)" >&2
  exit 1
fi
export KERNELHUB_BUILDER_ENVS_READ_ONLY=1 PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1
export PYTHONPATH="$builderSrc/src:$loaderSrc/src"
export HOME="$NIX_BUILD_TOP" TMPDIR="$NIX_BUILD_TOP"
for name in CUDA_HOME CXX; do
  eval "value=\${$name:-}"
  if [ -n "$value" ]; then export "$name"; fi
done
nix_build() { exec "$KERNELHUB_PYTHON" -m kernelhub_builder.compile.nix_build "$@"; }
case "$command" in
  build)
    nix_build build --project-file "$projectFile" --entry "$entry" --kernel-src "$kernelSrc" \
      --variant "$variant" --out "$out" ;;
  stamp)
    nix_build stamp --src "$built" --out "$out" --commit "$commit" --dirty "$dirty" ;;
  check)
    mkdir -p "$out"
    if ! "$KERNELHUB_PYTHON" -m kernelhub_builder.compile.nix_build check --project-file "$projectFile" \
        --entry "$entry" --kernel-src "$kernelSrc" --variant "$variant" --variant-dir "$built" \
        > "$out/report.txt" 2>&1; then
      cat "$out/report.txt" >&2
      exit 1
    fi
    cat "$out/report.txt" ;;
  *) echo "error: host-build.sh: unknown command $command" >&2; exit 1 ;;
esac
