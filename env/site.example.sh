# Copy to env/site.sh and adapt: env/activate.sh sources it before activating .venv.
# Typical module lines on a GPU cluster (names differ per site: `module avail`):
# module purge
# module load python/3.11 cuda/12.4 cudnn/9
# export HPC_TRAIN_DATA_DIR=/shared/datasets/mnist   # MNIST staged with hpc-train data fetch
