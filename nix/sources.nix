# The inputs of a variant's derivation, each a filtered copy in the store, so that a
# derivation changes exactly when what its variant id hashes changes
# (builder/src/kernelhub_builder/compile/source_hash.py): a README, test or benchmark edit
# rebuilds nothing, a change to one kernel rebuilds that kernel only. Shared by the host
# and the hermetic toolchains.
{ root }:
let
  inherit (builtins) concatMap elem stringLength substring;
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
in
{
  inherit kernelSrc kernelTreeSrc builderSrc loaderSrc projectFile;
}
