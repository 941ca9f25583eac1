"""Containers as GPU sites run them (docs/containers.md): the job body stays on the batch host, every rank runs in
the image. `runtime` is the pure core (which runtime runs an image, what is mounted, each runtime's command line);
`inside` is what a rank checks first in the image (a TensorFlow hpc-train can use)."""
