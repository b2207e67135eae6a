"""Test tooling, not product: the workloads with ground truth that the tests, the accuracy
harness and the shipped sample trace are made from (``generate``), noisy variants of real
traces (``noise``), the accuracy harness (``accuracy``), a live replay into the CLI
(``replay``), and a local Dask cluster of processes for the Dask tests and benchmark
(``dask_cluster``). Nothing in ``stream_split`` outside this package imports it, except the
CLI's ``--sample`` path, which only reads its output."""
