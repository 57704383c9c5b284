"""Host side of kml: kernel patch series, builds, QEMU runs, tests, benchmarks."""
