// Package deploy holds deployment files (SMF manifests, the Dockerfile,
// example configs); the dev stack builds in its image map from here.
package deploy

import _ "embed"

// ImageMap is images.yaml, the dev stack's default image map.
//
//go:embed images.yaml
var ImageMap []byte

// GrafanaDashboard is grafana/zonewright.json, the example dashboard over
// serve's and the agents' /metrics.
//
//go:embed grafana/zonewright.json
var GrafanaDashboard []byte
