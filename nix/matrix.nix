# Every variant of every kernel: the same list as `builder list-variants --json` (a test
# compares them), computed from the manifests alone. Mirrors
# builder/src/kernelhub_builder/plan/matrix.py; the names follow kernelhub.formats.variants.
{ manifest }:
let
  inherit (builtins) concatMap elem filter head length sort split;
  inherit (manifest) matrix versionKey;

  LINUX_ONLY = [ "cuda" "rocm" "xpu" ];

  mm = v: builtins.replaceStrings [ "." ] [ "" ] v; # "2.13" -> "213"
  computeTag = backend: version:
    if backend == "cuda" then "cu${mm version}"
    else if backend == "rocm" then "rocm${mm version}"
    else if backend == "xpu" then "xpu${mm version}"
    else backend;

  # kernelhub.system platform_problem: no torch exists for ROCm or XPU on aarch64.
  X86_64_ONLY = [ "rocm" "xpu" ];
  systemHasBackend = backend: arch: os:
    if elem backend X86_64_ONLY then os == "linux" && arch == "x86_64"
    else if elem backend LINUX_ONLY then os == "linux"
    else if backend == "metal" then arch == "aarch64" && os == "darwin"
    else true;

  inRange = low: high: v:
    (low == null || versionKey v >= versionKey low) && (high == null || versionKey v <= versionKey high);

  computes = kernel: backend:
    if backend == "cuda" then map (v: { inherit backend; version = v; })
      (filter (inRange kernel.cudaMinver kernel.cudaMaxver) matrix.cuda)
    else if backend == "rocm" then map (v: { inherit backend; version = v; }) matrix.rocm
    else if backend == "xpu" then map (v: { inherit backend; version = v; }) matrix.xpu
    else [ { inherit backend; version = null; } ];

  maxBy = key: list: builtins.foldl' (a: b: if key b > key a then b else a) (head list) list;

  stableAbiFor = kernel: backend:
    if kernel.torch.stableAbiByBackend != { } then kernel.torch.stableAbiByBackend.${backend} or null
    else kernel.torch.stableAbi;

  # The torch pinned to the matrix's CUDA: [toolchain] gpu-torch, else the newest.
  gpuTorch = if manifest.gpuTorch != null then manifest.gpuTorch else maxBy versionKey matrix.torch;

  # The torch minor whose env compiles a variant (matrix.py build_env_minor).
  buildEnvMinor = kind: torch: backend:
    if kind == "stable-abi" && backend != "cpu" then
      let newer = filter (v: versionKey v >= versionKey torch && versionKey v <= versionKey gpuTorch) matrix.torch; in
      if newer == [ ] then torch else maxBy versionKey newer
    else torch;

  row = kernel: { kind, torch ? null, backend ? null, version ? null, system ? null }:
    let
      parts = if system == null then [ null null ] else filter builtins.isString (split "-" system);
      arch = builtins.elemAt parts 0;
      os = builtins.elemAt parts 1;
      tag = if backend == null then null else computeTag backend version;
      name =
        if kind == "universal" then "torch-universal"
        else if kind == "noarch" then "torch-${backend}"
        else if kind == "stable-abi" then "torch-stable-abi${mm torch}-${tag}-${system}"
        else if os == "linux" then "torch${mm torch}-cxx11-${tag}-${system}"
        else "torch${mm torch}-${tag}-${system}";
    in
    {
      variant = name;
      inherit kind backend system;
      kernel = kernel.name;
      torch = if torch == null then null else buildEnvMinor kind torch backend;
      compute = if kind == "noarch" || kind == "universal" then null else tag;
    };

  variantsOf = kernel:
    let
      backends = filter (b: elem b matrix.backends) kernel.backends;
      torchVersions = filter (inRange kernel.torch.minver kernel.torch.maxver) matrix.torch;
      compiled = concatMap (backend:
        let stable = stableAbiFor kernel backend; in
        concatMap (compute:
          concatMap (system:
            let p = filter builtins.isString (split "-" system); in
            if !(systemHasBackend backend (head p) (builtins.elemAt p 1)) then [ ]
            else if stable != null then [ (row kernel { kind = "stable-abi"; torch = stable; inherit backend system; inherit (compute) version; }) ]
            else map (torch: row kernel { kind = "compiled"; inherit torch backend system; inherit (compute) version; }) torchVersions
          ) matrix.systems
        ) (computes kernel backend)
      ) backends;
      rows =
        if kernel.universal then [ (row kernel { kind = "universal"; }) ]
        else if kernel.torch.noarch then map (backend: row kernel { kind = "noarch"; inherit backend; }) backends
        else compiled;
    in
    sort (a: b: a.variant < b.variant) rows;
in
{
  inherit variantsOf gpuTorch;
  # The newest torch of the matrix: the one pure-Python variants are import-checked
  # under (kernel_tests.py).
  newestTorch = maxBy versionKey matrix.torch;
  byKernel = builtins.listToAttrs (map (k: { name = k.name; value = variantsOf k; }) manifest.kernels);
}
