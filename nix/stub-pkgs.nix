# A package set with the attribute names the hermetic derivations take from nixpkgs
# (stdenv.mkDerivation, python3.withPackages, python3Packages.torch, cudaPackages_13_0,
# ninja, runCommand, …), for instantiating them offline. Every package here is a
# derivation that fails when built: this set only proves that the hermetic expressions
# evaluate and what they would depend on. It is not a toolchain.
{ system }:
let
  stub = name: attrs: derivation ({
    inherit name system;
    builder = "/bin/sh";
    args = [ "-c" "echo 'stub package ${name}: nix/stub-pkgs.nix only instantiates, never builds' >&2; exit 1" ];
  } // attrs) // { version = attrs.version or "0"; pname = name; };
  pythonPackage = name: version: stub "python3-${name}-${version}" { inherit version; };
  python3Packages = {
    torch = pythonPackage "torch" "2.13.0";
    torch-bin = pythonPackage "torch-bin" "2.14.1";
    numpy = pythonPackage "numpy" "2.2.0";
    pytest = pythonPackage "pytest" "8.3.0";
    jinja2 = pythonPackage "jinja2" "3.1.4";
    packaging = pythonPackage "packaging" "24.2";
    filelock = pythonPackage "filelock" "3.16.0";
    rich = pythonPackage "rich" "13.9.0";
    pyelftools = pythonPackage "pyelftools" "0.31";
    huggingface-hub = pythonPackage "huggingface-hub" "0.27.0";
    ninja = pythonPackage "ninja" "1.11.1";
  };
  cudaPackages = version: {
    cuda_nvcc = stub "cuda_nvcc-${version}" { inherit version; };
    cuda_cudart = stub "cuda_cudart-${version}" { inherit version; };
    cuda_cccl = stub "cuda_cccl-${version}" { inherit version; };
  };
in
{
  inherit python3Packages;
  python3 = stub "python3-3.12" { version = "3.12"; } // {
    withPackages = f: stub "python3-3.12-env" { packages = f python3Packages; };
  };
  ninja = stub "ninja" { };
  which = stub "which" { };
  cudaPackages_13_0 = cudaPackages "13.0";
  stdenv.mkDerivation = attrs: stub "${attrs.pname}-${attrs.version}"
    (builtins.removeAttrs attrs [ "pname" "version" ] // { stdenv = "stub-stdenv"; });
  runCommand = name: env: script: stub name (env // { buildCommand = script; });
}
