-- +goose Up
-- Which pods use an image (asked by every image deletion) is an index
-- lookup: the expression is the one store.podsUsingImageSQL tests.
CREATE INDEX pods_containers ON pods USING gin ((spec -> 'containers') jsonb_path_ops);

-- An image's state on each node, one row per node, written by that
-- node's pull alone: no node's report rewrites another's, and none takes
-- the change lock. The store puts the rows back into the Image's
-- status.nodes when it reads one. They go with their image or node.
CREATE TABLE image_node_status (
    image      text NOT NULL REFERENCES images (name) ON DELETE CASCADE,
    node       text NOT NULL REFERENCES nodes (name) ON DELETE CASCADE,
    phase      text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    message    text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (image, node)
);
CREATE INDEX image_node_status_node ON image_node_status (node);
INSERT INTO image_node_status (image, node, phase, reason, message, updated_at)
    SELECT i.name, n ->> 'node', n ->> 'phase', coalesce(n ->> 'reason', ''), coalesce(n ->> 'message', ''),
        coalesce((n ->> 'updated')::timestamptz, now())
    FROM images i, jsonb_array_elements(CASE WHEN jsonb_typeof(i.status -> 'nodes') = 'array' THEN i.status -> 'nodes' ELSE '[]' END) n
    WHERE EXISTS (SELECT 1 FROM nodes WHERE name = n ->> 'node')
    ON CONFLICT DO NOTHING;
UPDATE images SET status = status - 'nodes' WHERE status ? 'nodes';

-- +goose Down
UPDATE images i SET status = i.status || jsonb_build_object('nodes', (SELECT jsonb_agg(jsonb_build_object('node', n.node,
        'phase', n.phase, 'reason', n.reason, 'message', n.message, 'updated', n.updated_at) ORDER BY n.node)
    FROM image_node_status n WHERE n.image = i.name))
    WHERE EXISTS (SELECT 1 FROM image_node_status n WHERE n.image = i.name);
DROP TABLE image_node_status;
DROP INDEX pods_containers;
