# kernels.toml and every kernels-src/<k>/build.toml, read with builtins.fromTOML and
# checked the way the builder checks them (builder/src/kernelhub_builder/manifest/:
# build_toml.py, project.py, tables.py), so a bad manifest stops evaluation with the builder's
# words: "<file>: <dotted key>: <problem>", never a Nix stack trace.
#
# Only what the flake needs is read: the matrix, each kernel's identity, backends, torch
# range, stable ABI and the files its builds read. Everything else a build.toml holds is
# checked by the builder itself when the derivation runs it.
{ root }:
let
  inherit (builtins) attrNames concatMap elem filter foldl' genList head isAttrs isBool
    isInt isList isString length listToAttrs match pathExists readDir readFile sort
    split substring stringLength tail toString typeOf;

  BACKENDS = [ "cpu" "cuda" "rocm" "xpu" "metal" ];
  UNBUILDABLE_BACKENDS = [ "neuron" "cann" ];
  SYSTEMS = [ "x86_64-linux" "x86_64-darwin" "aarch64-linux" "aarch64-darwin" ];
  DEFAULT_MATRIX = {
    torch = [ "2.13" "2.14" ];
    backends = [ "cpu" "cuda" "rocm" "xpu" "metal" ];
    systems = [ "x86_64-linux" "aarch64-linux" "aarch64-darwin" ];
    cuda = [ "13.0" ];
    rocm = [ "7.0" ];
    xpu = [ "2025.2" ];
  };

  join = sep: list: builtins.concatStringsSep sep list;
  repr = v:
    if isString v then "'${v}'"
    else if isBool v then (if v then "True" else "False")
    else if isList v then "[${join ", " (map repr v)}]"
    else if isAttrs v then "{...}"
    else toString v;
  pyType = v:
    { string = "str"; int = "int"; float = "float"; list = "list"; set = "dict"; bool = "bool"; }
    .${typeOf v} or (typeOf v);
  unique = list: foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ] list;
  minBy = key: list: foldl' (a: b: if key b < key a then b else a) (head list) (tail list);

  # One TOML table and where it came from: every complaint names file and dotted key.
  table = file: prefix: data: rec {
    inherit file prefix data;
    key = name: if prefix == "" then name else "${prefix}.${name}";
    fail = name: problem: throw "${file}: ${key name}: ${problem}";
    failTop = problem: throw "${file}: ${problem}";
    has = name: data ? ${name};
    checkKeys = allowed:
      let unknown = filter (n: !(elem n allowed)) (attrNames data);
      in if unknown == [ ] then true
      else fail (head unknown) "unknown key; allowed in ${if prefix == "" then "the top level" else "[${prefix}]"}: ${join ", " allowed}";
    typed = name: ok: what: required:
      if !(has name) then (if required then fail name "missing; it is required (${what})" else null)
      else
        let v = data.${name}; in
        if isBool v && what != "true or false" then fail name "expected ${what}, got a boolean (${repr v})"
        else if !(ok v) then fail name "expected ${what}, got ${pyType v} ${repr v}"
        else v;
    str = name: required:
      let v = typed name isString "a string" required; in
      if v != null && match "[[:space:]]*" v != null then fail name "must not be empty" else v;
    int = name: let v = typed name isInt "an integer" false; in
      if v != null && v < 0 then fail name "must be 0 or more, got ${toString v}" else v;
    bool = name: let v = typed name isBool "true or false" false; in v == true;
    strs = name: required:
      let v = typed name isList "a list of strings" required; in
      if v == null then [ ]
      else map (item: if isString item && match "[[:space:]]*" item == null then item
                      else fail name "expected a list of non-empty strings, found ${repr item}") v;
    sub = name: let v = typed name isAttrs "a table" false; in
      if v == null then null else table file (key name) v;
  };

  majorMinor = t: name: value: what:
    if value == null then null
    else
      let m = match "([0-9]+)\\.([0-9]+)(\\.[0-9]+)?" value; in
      if m == null then t.fail name "${repr value} is not a ${what} version such as '2.13'"
      else "${toString (builtins.fromJSON (stripZeros (head m)))}.${toString (builtins.fromJSON (stripZeros (builtins.elemAt m 1)))}";
  stripZeros = s: let m = match "0*([0-9]+)" s; in head m;
  versionKey = v: let parts = filter isString (split "\\." v); in
    (builtins.fromJSON (stripZeros (head parts))) * 100000 + builtins.fromJSON (stripZeros (builtins.elemAt parts 1));

  readToml = file:
    if !(pathExists (root + "/${file}")) then throw "${file}: file not found"
    else builtins.fromTOML (readFile (root + "/${file}"));

  # ------------------------------------------------------------------ kernels.toml
  projectFile = "kernels.toml";
  top = table projectFile "" (readToml projectFile);
  matrixTable = if top.sub "matrix" != null then top.sub "matrix" else table projectFile "matrix" { };
  matrixValues = name: check:
    if !(matrixTable.has name) then DEFAULT_MATRIX.${name}
    else
      let items = matrixTable.strs name false; in
      if length (unique items) != length items then matrixTable.fail name "has duplicates: ${repr items}"
      else map check items;
  oneOf = name: allowed: item:
    if elem item allowed then item
    else matrixTable.fail name "unknown value ${repr item}; allowed: ${join ", " allowed}";
  toolkit = name: item:
    let m = match "([0-9]+)\\.([0-9]+).*" item; in
    if m == null then matrixTable.fail name "bad ${name} version ${repr item}"
    else "${stripZeros (head m)}.${stripZeros (builtins.elemAt m 1)}";

  matrix =
    assert top.checkKeys [ "kernels" "build-dir" "hub" "matrix" "toolchain" "releases" ];
    assert matrixTable.checkKeys [ "torch" "backends" "systems" "cuda" "rocm" "xpu" ];
    let torch = matrixValues "torch" (v: majorMinor matrixTable "torch" v "torch"); in
    if torch == [ ] then matrixTable.fail "torch" "is empty; list at least one torch version such as '2.13'"
    else {
      inherit torch;
      backends = matrixValues "backends" (oneOf "backends" BACKENDS);
      systems = matrixValues "systems" (oneOf "systems" SYSTEMS);
      cuda = matrixValues "cuda" (toolkit "cuda");
      rocm = matrixValues "rocm" (toolkit "rocm");
      xpu = matrixValues "xpu" (toolkit "xpu");
    };

  kernelEntries =
    if top.has "kernels" then
      let names = top.strs "kernels" false; in
      if length (unique names) != length names
      then top.fail "kernels" "${repr (head (filter (n: length (filter (m: m == n) names) > 1) names))} is listed twice; list each kernel once"
      else names
    else
      let dir = readDir (root + "/kernels-src"); in
      filter (n: dir.${n} == "directory" && pathExists (root + "/kernels-src/${n}/build.toml"))
        (attrNames dir);

  kernelDir = entry: if match ".*/.*" entry != null then entry else "kernels-src/${entry}";

  # ------------------------------------------------------------------ build.toml
  # Edition 6 (the builder's manifest/model.py declares each key; these are its union over
  # editions, the finer per-edition checks run in the builder).
  GENERAL_KEYS = [ "name" "version" "edition" "license" "release" "backends" "hub" "cuda" "xpu"
    "neuron" "tpu" "python-depends" "upstream" "source" "universal" "cuda-minver" "cuda-maxver"
    "build-layout" "kernel-depends" ];
  LEGACY_LANGUAGES = { cuda = "cuda"; "cuda-hipify" = "cuda"; metal = "metal"; };
  # Edition 6 names a part's kind with `language`: cpp-<backend> (rust-* kinds build tvm-ffi).
  PART_KINDS = { "cpp-cpu" = "cpu"; "cpp-cuda" = "cuda"; "cpp-metal" = "metal";
    "cpp-rocm" = "rocm"; "cpp-xpu" = "xpu"; };

  loadKernel = entry:
    let
      dir = kernelDir entry;
      file = "${dir}/build.toml";
      t = table file "" (if pathExists (root + "/${file}") then readToml file
            else top.fail "kernels" "${repr entry} has no build.toml at ${dir}; create the kernel there or remove it from the list");
      general = let g = t.sub "general"; in
        if g == null then t.fail "general" "missing; every build.toml starts with [general] name = …" else g;
      name = let n = general.str "name" true; in
        if match "[a-z]([a-z0-9_-]*[a-z0-9])?" n == null
        then general.fail "name" "${repr n} is not a kernel name: use lowercase letters, digits, '-' or '_', starting with a letter (e.g. 'activation', 'flash-attn2')"
        else n;
      version = let v = general.int "version"; in if v == null then 1 else v;
      # kernels.toml [releases] first (edition 5 has no general.release), then the older key.
      releases = let r = top.sub "releases"; in if r == null then { } else r.data;
      release = if releases ? ${name} then releases.${name}
        else let r = general.str "release" false; in if r == null then "${toString version}.0.0" else r;

      kernelTable = t.sub "kernel";
      parts = if kernelTable == null then [ ] else concatMap (partName:
        let
          p = kernelTable.sub partName;
          language = p.str "language" false;
          backend = let b = p.str "backend" false; in
            if b != null then b
            else if language != null && PART_KINDS ? ${language} then PART_KINDS.${language}
            else LEGACY_LANGUAGES.${if language == null then "cuda" else language} or "cuda";
          part = {
            inherit backend;
            name = partName;
            src = p.strs "src" true;
            include = p.strs "include" false;
          };
        in
        if language != null && !(LEGACY_LANGUAGES ? ${language}) && !(PART_KINDS ? ${language})
        then p.fail "language" "unknown part kind ${repr language}; allowed: ${join ", " (attrNames PART_KINDS)}"
        else if !(elem backend BACKENDS)
        then p.fail "backend" "unknown backend ${repr backend}; allowed: ${join ", " BACKENDS}"
        else [ part ] ++ (if language == "cuda-hipify" then [ (part // { backend = "rocm"; name = "${partName}_rocm"; }) ] else [ ])
      ) (attrNames kernelTable.data);

      noarchTable = t.sub "torch-noarch";
      torchTable = t.sub "torch";
      universal = general.bool "universal" || (torchTable != null && torchTable.bool "universal");
      noarch = noarchTable != null || torchTable == null || universal;

      backends =
        if !(general.has "backends") then
          (if universal then BACKENDS
           else if noarch then general.fail "backends" "missing; list the backends this kernel supports, e.g. backends = [\"cuda\"] (allowed: ${join ", " BACKENDS})"
           else filter (b: elem b (map (p: p.backend) parts)) BACKENDS)
        else
          let
            listed = general.strs "backends" false;
            bad = filter (b: !(elem b BACKENDS) && !(elem b UNBUILDABLE_BACKENDS)) listed;
            buildable = filter (b: elem b BACKENDS) listed;
          in
          if length (unique listed) != length listed then general.fail "backends" "has duplicates: ${repr listed}"
          else if bad != [ ] then general.fail "backends" "unknown backend ${repr (head bad)}; allowed: ${join ", " BACKENDS}"
          else if buildable == [ ] then general.fail "backends" "no buildable backend; allowed: ${join ", " BACKENDS}"
          else buildable;

      torch =
        if noarchTable != null && torchTable != null
        then t.fail "torch-noarch" "use either [torch] (compiled) or [torch-noarch] (pure Python), not both"
        else if torchTable == null && noarchTable == null && parts != [ ]
        then t.fail "torch" "missing; compiled [kernel.*] parts need a [torch] table listing the binding sources (src = [\"torch-ext/torch_binding.cpp\"])"
        else if noarch then
          (if parts != [ ] then t.fail "kernel" "a pure-Python kernel ([torch-noarch] or universal) has no compiled parts; remove the [kernel.*] tables or use [torch]"
           else { noarch = true; src = [ ]; include = [ ]; minver = null; maxver = null; stableAbi = null; stableAbiByBackend = { }; })
        else
          assert torchTable.checkKeys [ "src" "include" "pyext" "minver" "maxver" "stable-abi" "cxx-flags" "universal" ];
          let
            minver = majorMinor torchTable "minver" (torchTable.str "minver" false) "torch";
            maxver = majorMinor torchTable "maxver" (torchTable.str "maxver" false) "torch";
            sa = torchTable.data."stable-abi" or null;
            saTable = table file (torchTable.key "stable-abi") sa;
            byBackend =
              if isAttrs sa then
                assert saTable.checkKeys BACKENDS;
                listToAttrs (map (b: { name = b; value = majorMinor saTable b (saTable.str b false) "torch"; }) (attrNames sa))
              else { };
            stableAbi =
              if sa == null || sa == false then null
              else if sa == true then minBy versionKey matrix.torch
              else if isString sa then majorMinor torchTable "stable-abi" sa "torch"
              else if isAttrs sa then minBy versionKey (builtins.attrValues byBackend)
              else torchTable.fail "stable-abi" "expected true, a torch version such as '2.13', or a table of backend = version; got ${repr sa}";
          in
          if minver != null && maxver != null && versionKey minver > versionKey maxver
          then torchTable.fail "maxver" "${maxver} is below minver ${minver}"
          else {
            noarch = false;
            src = torchTable.strs "src" false;
            include = torchTable.strs "include" false;
            inherit minver maxver stableAbi;
            stableAbiByBackend = byBackend;
          };

      cudaTable = let c = general.sub "cuda"; in if c == null then table file "general.cuda" { } else c;
      cudaBound = k:
        let legacy = "cuda-${k}"; in
        if cudaTable.has k && general.has legacy
        then general.fail legacy "set only general.cuda.${k} (this is its old name)"
        else if cudaTable.has k then majorMinor cudaTable k (cudaTable.str k false) "CUDA"
        else majorMinor general legacy (general.str legacy false) "CUDA";
      cudaMinver = cudaBound "minver";
      cudaMaxver = cudaBound "maxver";

      checked =
        assert (if t.has "tvm-ffi" then t.fail "tvm-ffi" "kernelhub builds torch extensions only; use [torch] (compiled) or [torch-noarch] (pure Python)" else true);
        assert (if t.has "mlx-noarch" then t.fail "mlx-noarch" "cannot build: MLX kernels (mlx-metal) are written for Apple's MLX framework, not torch; kernelhub builds torch kernels" else true);
        assert (let e = general.int "edition"; in e == null || e == 5 || e == 6
                || general.fail "edition" "unsupported edition ${toString e}; kernelhub reads editions 5 and 6 (and the unversioned schema before them)");
        assert t.checkKeys [ "general" "torch" "torch-noarch" "kernel" ];
        assert general.checkKeys GENERAL_KEYS;
        assert cudaTable.checkKeys [ "minver" "maxver" "python-depends" "kernel-depends" ];
        assert (cudaMinver == null || cudaMaxver == null || versionKey cudaMinver <= versionKey cudaMaxver
                || cudaTable.fail "maxver" "CUDA ${cudaMaxver} is below minver ${cudaMinver}");
        # A listed backend without a part builds from the [torch] binding alone (as in the builder).
        assert (match "[0-9]+\\..*" release != null && versionKey release == versionKey release
                && (builtins.fromJSON (stripZeros (head (match "([0-9]+)\\..*" release)))) == version
                || general.fail "release" "${repr release} has major ${head (match "([0-9]+).*" release)} but general.version is ${toString version}; a release lives on branch v<version>, so make the majors agree");
        true;
    in
    assert checked;
    {
      inherit entry dir name version release parts backends torch universal cudaMinver cudaMaxver;
      packageDir = "torch-ext/${builtins.replaceStrings [ "-" ] [ "_" ] name}";
      partsFor = backend: filter (p: p.backend == backend) parts;
    };

  kernels = map loadKernel kernelEntries;
in
{
  inherit matrix kernels versionKey BACKENDS;
  torchPins = let tc = top.sub "toolchain"; in
    if tc == null || tc.sub "torch" == null then { } else (tc.sub "torch").data;
  # [toolchain] gpu-torch (project.py): the torch pinned to the matrix's CUDA; null → newest.
  gpuTorch = let tc = top.sub "toolchain"; in
    if tc == null || !(tc.has "gpu-torch") then null
    else let v = majorMinor tc "gpu-torch" (tc.str "gpu-torch" false) "torch"; in
      if elem v matrix.torch then v
      else tc.fail "gpu-torch" "'${v}' is not in [matrix] torch (${join ", " matrix.torch}); name one of those";
}
