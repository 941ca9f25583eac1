"""The site kit: what a cluster's administrator installs on the nodes, apart from training.

`firewall` is pure (the nft ruleset of a job, the tables a sweep removes);
`kit` is its edge, run as Slurm's Prolog and Epilog (`hpc-train site firewall
--prolog` / `--epilog`, docs/site-firewall.md). It imports nothing of training
and nothing of TensorFlow: the port rule (bootstrap.ports), the node list parser
and the Slurm client only.
"""
