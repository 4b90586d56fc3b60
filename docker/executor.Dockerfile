# The GPU executor: the CUDA toolkit (nvcc, headers) from NVIDIA's devel image, pycuda built against it.
FROM nvidia/cuda:13.0.1-devel-ubuntu24.04
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md requirements/constraints.txt ./
COPY api ./api
COPY graphdb ./graphdb
COPY search ./search
COPY executor ./executor
COPY bench ./bench
COPY regraph_cli ./regraph_cli
COPY regraph_data ./regraph_data
RUN pip install --no-cache-dir -c constraints.txt ".[gpu]"
EXPOSE 8081
CMD ["regraph", "executor", "serve", "--host", "0.0.0.0", "--port", "8081"]
