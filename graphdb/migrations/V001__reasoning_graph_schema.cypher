// The reasoning graph's schema (ReGraphT): technique nodes, example nodes on transitions, tasks.
// Append-only: never edit this file once applied; add V002__... instead.

CREATE CONSTRAINT technique_name_unique IF NOT EXISTS
FOR (t:Technique) REQUIRE t.name IS UNIQUE;

CREATE CONSTRAINT example_id_unique IF NOT EXISTS
FOR (e:Example) REQUIRE e.id IS UNIQUE;

CREATE CONSTRAINT task_id_unique IF NOT EXISTS
FOR (t:Task) REQUIRE t.id IS UNIQUE;

CREATE CONSTRAINT trajectory_id_unique IF NOT EXISTS
FOR (t:Trajectory) REQUIRE t.id IS UNIQUE;

// all-MiniLM-L6-v2 embeds into 384 dimensions; cosine is what it was trained for.
CREATE VECTOR INDEX technique_embedding IF NOT EXISTS
FOR (t:Technique) ON t.embedding
OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};

CREATE VECTOR INDEX example_code_embedding IF NOT EXISTS
FOR (e:Example) ON e.code_embedding
OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};

CREATE FULLTEXT INDEX technique_text IF NOT EXISTS
FOR (t:Technique) ON EACH [t.name, t.aliases, t.description];
