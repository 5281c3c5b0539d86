{
  # kernelhub's front door for builds. Host-toolchain outputs (this machine's compilers
  # and the builder's torch environments, see nix/host.nix and docs/nix.md):
  #   nix build .#kernels                 every CPU, CUDA and pure-Python variant of this system
  #   nix build .#kernels-cpu             the same without CUDA (machines without nvcc)
  #   nix build .#activation              one kernel, laid out like build/
  #   nix build .#activation-torch213-cxx11-cpu-x86_64-linux    one variant
  #   nix eval --json .#variants          the whole matrix (= builder list-variants --json)
  #   nix flake check                     builder check + kernel tests per built variant
  #   nix build .#hermetic.x86_64-linux.kernels   the hermetic toolchain (nixpkgs from flake.lock;
  #                                            never built on this project's offline machines)
  description = "kernelhub: build, publish and load PyTorch compute kernels";

  # The hermetic toolchain's package set. Not a flake input (flake = false): nothing is
  # fetched unless a hermetic output is evaluated, so host outputs evaluate offline.
  inputs.nixpkgs = {
    url = "github:NixOS/nixpkgs/b64ec1944ea40d9f3920f938e17ed39a9978c6c7";
    flake = false;
  };

  outputs = { self, nixpkgs }:
    let
      manifest = import ./nix/manifest.nix { root = ./.; };
      matrix = import ./nix/matrix.nix { inherit manifest; };
      systems = manifest.matrix.systems;
      forSystems = f: builtins.listToAttrs (map (system: { name = system; value = f system; }) systems);
      # Nix 2.8 gives a dirty tree no revision; newer Nix gives dirtyRev.
      rev = self.rev or self.dirtyRev or null;
      dirty = !(self ? rev);
      hermetic = pkgs: system: import ./nix/hermetic.nix {
        root = ./.;
        inherit pkgs system manifest matrix;
      };
      host = system: import ./nix/host.nix {
        root = ./.;
        inherit system manifest matrix rev dirty;
      };
    in
    {
      lib = {
        manifest = builtins.fromTOML (builtins.readFile ./kernels.toml);
        # kernel -> [ { variant, kind, backend, compute, system, torch, kernel } ]
        variants = matrix.byKernel;
        # Which builder Python the host derivations run with (nix/host.nix).
        hostPythonKey = (host (builtins.head systems)).pythonKey;
        # The hermetic derivations instantiated against nix/stub-pkgs.nix (offline;
        # their packages fail if built): what they would depend on, checkable here.
        hermeticStub = forSystems (system:
          hermetic (import ./nix/stub-pkgs.nix { inherit system; }) system);
      };

      # Hermetic toolchain: compilers, Python and torch from the pinned nixpkgs, sandboxed.
      hermetic = forSystems (system: hermetic
        (import nixpkgs { inherit system; config = { allowUnfree = true; cudaSupport = true; }; })
        system);

      packages = forSystems (system:
        let h = host system; in
        h.perVariantPackages // h.perKernelPackages // {
          inherit (h) kernels kernels-cpu;
          default = h.kernels;
        });

      # `nix eval --json .#variants` (the same list as lib.variants).
      variants = matrix.byKernel;

      checks = forSystems (system: (host system).checks);

      devShells = forSystems (system: {
        default = derivation {
          name = "kernelhub-dev-shell";
          inherit system;
          builder = "/bin/bash";
          outputs = [ "out" ];
          args = [ "-c" "echo 'use: nix develop' > $out" ];
          PATH = "/usr/local/bin:/usr/bin:/bin";
          shellHook = ''
            # The host toolchain: the checkout's .venv (made by ci/setup) and its tools.
            if [ -f ci/setup ]; then bash ci/setup && . .venv/bin/activate; fi
          '';
        };
      });
    };
}
