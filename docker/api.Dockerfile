# The knowledge API. Neo4j is a separate service (NEO4J_URI), so no Java is needed here.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md requirements/constraints.txt ./
COPY api ./api
COPY graphdb ./graphdb
COPY search ./search
COPY executor ./executor
COPY bench ./bench
COPY regraph_cli ./regraph_cli
COPY regraph_data ./regraph_data
RUN pip install --no-cache-dir -c constraints.txt .
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
EXPOSE 8080
CMD ["regraph", "up", "--host", "0.0.0.0", "--no-with-executor"]
