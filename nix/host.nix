# Host-toolchain derivations: the builder's own Python code (from the store) driving
# this machine's compilers and the builder's torch environments (outside the store;
# see host-build.sh). Not hermetic: the store path does not change when the host's
# compiler or torch env does. One derivation per variant; its inputs are exactly what
# the variant id hashes (builder/src/kernelhub_builder/source_hash.py): kernels.toml,
# the kernel's build files, and the builder itself.
{ root, system, manifest, matrix, rev, dirty }:
let
  inherit (builtins) concatMap concatStringsSep elem filter listToAttrs map stringLength substring;

  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;
  hasSuffix = suffix: s:
    let n = stringLength s; m = stringLength suffix; in n >= m && substring (n - m) m s == suffix;
  # Directories the builder never reads (source_hash._SKIPPED_DIRS and dot dirs).
  skipped = name: elem name [ "__pycache__" ".git" ".pytest_cache" "build" "result" ]
    || hasPrefix "." name;
  baseName = p: let parts = builtins.filter builtins.isString (builtins.split "/" p); in
    builtins.elemAt parts (builtins.length parts - 1);
  HEADER_SUFFIXES = [ ".h" ".hh" ".hpp" ".hxx" ".cuh" ".inc" ".inl" ".ipp" ".metal" ];

  # The files one kernel's builds read: build.toml, the Python package, every part's
  # sources and the headers of its include dirs (all backends: the builder checks that
  # every listed source exists, whichever backend it builds).
  kernelFiles = kernel: rec {
    files = [ "build.toml" ] ++ kernel.torch.src ++ concatMap (p: p.src) kernel.parts;
    trees = [ kernel.packageDir ];
    includes = kernel.torch.include ++ concatMap (p: p.include) kernel.parts;
  };
  kernelFilter = kernel: base:
    let
      want = kernelFiles kernel;
      under = dir: rel: dir == "." || rel == dir || hasPrefix "${dir}/" rel;
      above = rel: dir: hasPrefix "${rel}/" "${dir}/";
    in
    path: type:
      let rel = substring (stringLength (toString base) + 1) (stringLength path) path; in
      !(skipped (baseName path)) && !(hasSuffix ".pyc" path) && (
        if type == "directory" then
          builtins.any (f: above rel f) (want.files ++ want.trees ++ want.includes)
          || builtins.any (d: under d rel) (want.trees ++ want.includes)
        else
          elem rel want.files || builtins.any (d: under d rel) want.trees
          || (builtins.any (d: under d rel) want.includes
              && builtins.any (s: hasSuffix s rel) HEADER_SUFFIXES));

  kernelSrc = kernel:
    let base = root + "/${kernel.dir}"; in
    builtins.path { path = base; name = "${kernel.name}-build-src"; filter = kernelFilter kernel base; };
  # Checks also need the kernel's tests.
  kernelTreeSrc = kernel:
    let base = root + "/${kernel.dir}"; in
    builtins.path {
      path = base; name = "${kernel.name}-src";
      filter = path: type: !(skipped (baseName path)) && !(hasSuffix ".pyc" path);
    };
  pythonSrc = dir: name: builtins.path {
    path = root + "/${dir}"; inherit name;
    filter = path: type:
      let rel = substring (stringLength (toString (root + "/${dir}")) + 1) (stringLength path) path; in
      !(skipped (baseName path)) && !(hasSuffix ".pyc" path) && !(hasSuffix ".egg-info" path)
      && (rel == "pyproject.toml" || rel == "src" || hasPrefix "src/" rel);
  };
  builderSrc = pythonSrc "builder" "kernelhub-builder-src";
  loaderSrc = pythonSrc "loader" "kernelhub-loader-src";
  projectFile = builtins.path { path = root + "/kernels.toml"; name = "kernels.toml"; };
  script = builtins.path { path = ./host-build.sh; name = "kernelhub-host-build.sh"; };

  common = {
    inherit system builderSrc loaderSrc projectFile;
    builder = "/bin/sh";
    PATH = "/usr/local/bin:/usr/bin:/bin";
  };

  # Variants of this system that the host toolchain is expected to build: CPU and CUDA
  # (nvcc 13.0 and the CUDA torch env, as on this project's CI machines) and every
  # pure-Python variant. ROCm, XPU and Metal variants have packages too (their build
  # stops with the builder's reason when the toolchain is missing) but are not in
  # `kernels`.
  isPure = v: v.kind == "noarch" || v.kind == "universal";
  ofSystem = v: isPure v || v.system == system;
  hostBackends = [ "cpu" "cuda" ];
  inDefault = v: isPure v || elem v.backend hostBackends;
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
