# Host-toolchain derivations: the builder's own Python code (from the store) driving
# this machine's compilers and the builder's torch environments (outside the store;
# see host-build.sh). Not hermetic: the store path does not change when the host's
# compiler or torch env does. One derivation per variant; its inputs are exactly what
# the variant id hashes (builder/src/kernelhub_builder/compile/source_hash.py): kernels.toml,
# the kernel's build files, and the builder itself.
{ root, system, manifest, matrix, rev, dirty }:
let
  inherit (builtins) concatMap concatStringsSep elem filter listToAttrs map;

  sources = import ./sources.nix { inherit root; };
  inherit (sources) kernelSrc kernelTreeSrc builderSrc loaderSrc projectFile;
  script = builtins.path { path = ./host-build.sh; name = "kernelhub-host-build.sh"; };

  # The builder's Python on this machine: the venv ci/setup-nix made for these exact
  # dependency lists, $KERNELHUB_BUILDER_HOME/nix-python/<pythonKey> (nix_host.py
  # python_key computes the same; a test compares). Shared by every checkout with the
  # same dependencies; the builder's own code comes from builderSrc, not from it.
  dependencies = dir: (builtins.fromTOML (builtins.readFile (root + "/${dir}/pyproject.toml"))).project.dependencies;
  pythonKey = builtins.substring 0 16 (builtins.hashString "sha256"
    (concatStringsSep "" (map (d: d + "\n") (dependencies "builder" ++ dependencies "loader"))));

  common = {
    inherit system builderSrc loaderSrc projectFile pythonKey;
    builder = "/bin/sh";
    PATH = "/usr/local/bin:/usr/bin:/bin";
  };

  # Variants of this system that the host toolchain is expected to build: CPU, pure
  # Python, and CUDA where the variant's torch env is the GPU torch ([toolchain]
  # gpu-torch, default the newest) — the only one pinned to a build for the matrix's CUDA
  # (matrix.py build_env_minor; torch 2.13 is CPU-only here, PyPI's 2.15 is CUDA 13.2),
  # with nvcc of the variant's CUDA on the host, as on this project's CI machines.
  # Every other variant (older-torch CUDA, ROCm, XPU, Metal) has its own package, whose
  # build stops with the builder's reason where the toolchain is missing.
  isPure = v: v.kind == "noarch" || v.kind == "universal";
  ofSystem = v: isPure v || v.system == system;
  inherit (matrix) gpuTorch;
  inDefault = v: isPure v || v.backend == "cpu" || (v.backend == "cuda" && v.torch == gpuTorch);
  inCpu = v: isPure v || v.backend == "cpu";

  variantDrvs = kernel: v: rec {
    built = derivation (common // {
      name = "${kernel.name}-${v.variant}-build";
      args = [ script "build" ];
      kernelSrc = kernelSrc kernel;
      inherit (kernel) entry;
      inherit (v) variant;
    });
    # The same files with provenance naming the flake's commit (a copy: no compile).
    stamped = derivation (common // {
      name = "${kernel.name}-${v.variant}";
      args = [ script "stamp" ];
      inherit built;
      commit = if rev == null then "" else rev;
      dirty = if dirty then "1" else "0";
    });
    check = derivation (common // {
      name = "${kernel.name}-${v.variant}-check";
      args = [ script "check" ];
      kernelSrc = kernelTreeSrc kernel;
      inherit (kernel) entry;
      inherit (v) variant;
      built = stamped;
    });
  };

  perKernel = map (kernel: {
    inherit kernel;
    variants = map (v: { inherit v; drvs = variantDrvs kernel v; })
      (filter ofSystem matrix.byKernel.${kernel.name});
  }) manifest.kernels;

  # build/ layout: <kernel>/<variant> -> the variant's store path.
  layout = name: pick: derivation (common // {
    inherit name;
    builder = "/bin/sh";
    args = [ "-c" ''
      set -eu
      mkdir -p "$out"
      ${concatStringsSep "\n" (concatMap (k:
        let chosen = filter (x: pick x.v) k.variants; in
        if chosen == [ ] then [ ] else
        [ "mkdir -p \"$out/${k.kernel.name}\"" ]
        ++ map (x: "ln -s ${x.drvs.stamped} \"$out/${k.kernel.name}/${x.v.variant}\"") chosen
      ) perKernel)}
    '' ];
  });
in
rec {
  inherit pythonKey;
  kernels = layout "kernels" inDefault;
  kernels-cpu = layout "kernels-cpu" inCpu;
  perKernelPackages = listToAttrs (map (k: {
    name = k.kernel.name;
    value = derivation (common // {
      name = k.kernel.name;
      args = [ "-c" ''
        set -eu
        mkdir -p "$out/${k.kernel.name}"
        ${concatStringsSep "\n" (map (x: "ln -s ${x.drvs.stamped} \"$out/${k.kernel.name}/${x.v.variant}\"")
          (filter (x: inDefault x.v) k.variants))}
      '' ];
    });
  }) perKernel);
  perVariantPackages = listToAttrs (concatMap (k: map (x: {
    name = "${k.kernel.name}-${x.v.variant}";
    value = x.drvs.stamped;
  }) k.variants) perKernel);
  unstampedPackages = listToAttrs (concatMap (k: map (x: {
    name = "${k.kernel.name}-${x.v.variant}";
    value = x.drvs.built;
  }) k.variants) perKernel);
  checks = listToAttrs (concatMap (k: map (x: {
    name = "${k.kernel.name}-${x.v.variant}";
    value = x.drvs.check;
  }) (filter (x: inDefault x.v) k.variants)) perKernel);
}
