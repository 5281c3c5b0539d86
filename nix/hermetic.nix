# Hermetic-toolchain derivations: compilers, Python and torch from a nixpkgs package set
# (the one pinned in flake.lock), built in Nix's sandbox with nothing from the host —
# the way the kernel ecosystem's own Nix builder works. The same Python builder runs
# inside (nix_build.py), against a torch environment made from nixpkgs' torch
# (`adopt-env`), with the same filtered inputs as the host derivations (sources.nix).
#
# NEVER BUILT HERE: nixpkgs cannot be fetched on this project's machines. What is tested
# offline is that every derivation instantiates against nix/stub-pkgs.nix, a package set
# with nixpkgs' attribute names whose packages fail if built (tests/test_nix_flake.py).
# The pinned nixpkgs (March 2025) carries torch 2.6, not the matrix's 2.13/2.14: building
# for real needs a nixpkgs bump or a torch overlay; evaluation then stops with that
# message rather than building against the wrong torch.
{ pkgs, root, system, manifest, matrix }:
let
  inherit (builtins) concatMap elem filter listToAttrs replaceStrings;
  sources = import ./sources.nix { inherit root; };

  py = pkgs.python3Packages;
  builderDeps = ps: [ ps.jinja2 ps.packaging ps.filelock ps.rich ps.pyelftools
    ps.huggingface-hub ps.ninja ];
  # The torch env's Python: a torch of the variant's minor plus what `builder check`
  # imports with it. nixpkgs carries a source-built `torch` and a wheel-based `torch-bin`;
  # whichever has the minor is used.
  torchFor = minor:
    let
      matches = t: builtins.substring 0 (builtins.stringLength minor + 1) t.version == "${minor}.";
      found = filter matches [ py.torch py.torch-bin ];
    in
    if found == [ ] then
      throw "hermetic toolchain: the pinned nixpkgs has torch ${py.torch.version} and torch-bin ${py.torch-bin.version}, the matrix wants torch ${minor}; bump the nixpkgs input in flake.lock or add a torch ${minor} overlay"
    else builtins.head found;
  torchPython = minor:
    let torch = torchFor minor; in
    pkgs.python3.withPackages (ps: [ torch ps.numpy ps.pytest ] ++ builderDeps ps);
  cudaPackagesFor = version: pkgs."cudaPackages_${replaceStrings [ "." ] [ "_" ] version}";

  isPure = v: v.kind == "noarch" || v.kind == "universal";
  # What the hermetic toolchain can build: CPU and CUDA on Linux, pure Python anywhere.
  hermeticBackends = [ "cpu" "cuda" ];
  buildable = v: isPure v || (v.system == system && elem v.backend hermeticBackends);

  # Pure-Python variants are import-checked under the newest torch of the matrix
  # (kernel_tests.py), so they need that torch env too, as their host builds do; here,
  # the newest the package set carries (nixpkgs trails torch releases: none has 2.15
  # yet), and the newest of the matrix (stopping with torchFor's message) when none.
  carried = filter (m: filter (t: builtins.substring 0 (builtins.stringLength m + 1) t.version == "${m}.")
    [ py.torch py.torch-bin ] != [ ]) manifest.matrix.torch;
  pureTorch = if carried == [ ] then matrix.newestTorch
    else builtins.foldl' (a: b: if manifest.versionKey b > manifest.versionKey a then b else a)
      (builtins.head carried) carried;
  torchMinorOf = v: if isPure v then pureTorch else v.torch;

  variantDrv = kernel: v:
    let
      python = torchPython (torchMinorOf v);
      cuda = if v.backend == "cuda" && !(isPure v)
        then let
          digits = builtins.substring 2 (builtins.stringLength v.compute - 2) v.compute; # cu130 -> 130
          n = builtins.stringLength digits;
          c = cudaPackagesFor "${builtins.substring 0 (n - 1) digits}.${builtins.substring (n - 1) 1 digits}";
        in
          [ c.cuda_nvcc c.cuda_cudart c.cuda_cccl ]
        else [ ];
    in
    pkgs.stdenv.mkDerivation {
      pname = "${kernel.name}-${v.variant}";
      version = kernel.release;
      dontUnpack = true;
      nativeBuildInputs = [ python pkgs.ninja pkgs.which ] ++ cuda;
      builderSrc = sources.builderSrc;
      loaderSrc = sources.loaderSrc;
      projectFile = sources.projectFile;
      kernelSrc = sources.kernelSrc kernel;
      inherit (kernel) entry;
      inherit (v) variant;
      torchMinor = torchMinorOf v;
      CUDA_HOME = if cuda == [ ] then "" else "${builtins.head cuda}";
      buildPhase = ''
        export KERNELHUB_BUILDER_HOME=$TMPDIR/builder-home PYTHONDONTWRITEBYTECODE=1
        export PYTHONPATH=$builderSrc/src:$loaderSrc/src
        python -m kernelhub_builder.compile.nix_build adopt-env --project-file "$projectFile" \
          --minor "$torchMinor" --python "$(command -v python)"
        KERNELHUB_BUILDER_ENVS_READ_ONLY=1 python -m kernelhub_builder.compile.nix_build build \
          --project-file "$projectFile" --entry "$entry" --kernel-src "$kernelSrc" \
          --variant "$variant" --out "$out"
      '';
      dontInstall = true;
      dontFixup = true; # no strip/patchelf: the builder's bytes are the variant's digests
    };

  perVariant = listToAttrs (concatMap (kernel:
    map (v: { name = "${kernel.name}-${v.variant}"; value = variantDrv kernel v; })
      (filter buildable matrix.byKernel.${kernel.name})
  ) manifest.kernels);
in
perVariant // {
  kernels = pkgs.runCommand "kernels-hermetic" { } (builtins.concatStringsSep "\n" (
    [ "mkdir -p $out" ] ++ concatMap (kernel:
      map (v: "mkdir -p $out/${kernel.name} && ln -s ${perVariant."${kernel.name}-${v.variant}"} $out/${kernel.name}/${v.variant}")
        (filter buildable matrix.byKernel.${kernel.name})) manifest.kernels));
}
