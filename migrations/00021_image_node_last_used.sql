-- +goose Up
-- When a pod on the node last used the image (or the node pulled it):
-- image garbage collection removes the least recently used first.
ALTER TABLE image_node_status ADD COLUMN last_used timestamptz;
UPDATE image_node_status SET last_used = updated_at WHERE phase = 'Ready';

-- +goose Down
ALTER TABLE image_node_status DROP COLUMN last_used;
