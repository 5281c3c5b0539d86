{
  # Hermetic builds of the full matrix arrive with their own issue. For now the flake
  # exposes the project's manifest so tools can evaluate it offline:
  #   nix eval --json .#lib.manifest
  description = "kernelhub: build, publish and load PyTorch compute kernels";

  outputs = { self }: {
    lib.manifest = builtins.fromTOML (builtins.readFile ./kernels.toml);
  };
}
