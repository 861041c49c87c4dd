package agent

import "testing"

func TestEndpointListenAndAdvertiseAddress(t *testing.T) {
	for _, tt := range []struct {
		listen, advertise string
		ok                bool
	}{{":10250", "", true}, {"127.0.0.1:0", "", true}, {"", "", true}, {"10250", "", false}, {":10250", "node-a", false}, {":10250", "10.0.0.7", true}} {
		cfg := Config{Node: "node1", TemporalAddress: "t:7233", APIURL: "https://127.0.0.1:8080", Listen: tt.listen, AdvertiseAddress: tt.advertise}
		cfg.setDefaults()
		if err := cfg.validate(); (err == nil) != tt.ok {
			t.Errorf("listen %q advertise %q: validate = %v, want ok %v", tt.listen, tt.advertise, err, tt.ok)
		}
	}
	for _, tt := range []struct{ listen, advertise, want string }{
		{":10250", "10.0.0.7", "10.0.0.7"},   // as configured
		{"127.0.0.5:10250", "", "127.0.0.5"}, // the listen address's own
		{":10250", "", "127.0.0.1"},          // where this host reaches the API from
		{"0.0.0.0:10250", "", "127.0.0.1"},   // unspecified: likewise
	} {
		if got := advertiseAddress(Config{Listen: tt.listen, AdvertiseAddress: tt.advertise, APIURL: "https://127.0.0.1:8080"}); got != tt.want {
			t.Errorf("listen %q advertise %q: %q, want %q", tt.listen, tt.advertise, got, tt.want)
		}
	}
}
