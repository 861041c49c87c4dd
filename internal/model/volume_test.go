package model

import (
	"strings"
	"testing"
)

func claim(storage string) *PersistentVolumeClaim {
	c := &PersistentVolumeClaim{Metadata: ObjectMeta{Name: "db", Namespace: "default"},
		Spec: PersistentVolumeClaimSpec{Resources: VolumeResourceRequirements{Requests: ResourceList{ResourceStorage: storage}}}}
	DefaultPersistentVolumeClaim(c)
	return c
}

func refused(errs FieldErrors) string {
	var f []string
	for _, e := range errs {
		f = append(f, e.Field)
	}
	return strings.Join(f, " ")
}

func TestValidatePersistentVolumeClaim(t *testing.T) {
	if errs := ValidatePersistentVolumeClaim(claim("1Gi")); len(errs) > 0 {
		t.Fatalf("a valid claim: %v", errs)
	}
	c := claim("1Gi")
	c.Spec.AccessModes = []string{"ReadWriteOnce", "ReadOnlyMany"}
	c.Spec.PersistentVolumeReclaimPolicy = "Recycle"
	c.Spec.Resources.Requests["cpu"] = "1"
	if got := refused(ValidatePersistentVolumeClaim(c)); !strings.Contains(got, "spec.accessModes[1]") ||
		!strings.Contains(got, "spec.persistentVolumeReclaimPolicy") || !strings.Contains(got, "spec.resources.requests[cpu]") {
		t.Fatalf("fields refused: %s", got)
	}
	for _, bad := range []string{"", "0", "-1Gi", "lots"} {
		c := claim(bad)
		if bad == "" {
			delete(c.Spec.Resources.Requests, ResourceStorage)
		}
		if got := refused(ValidatePersistentVolumeClaim(c)); got != "spec.resources.requests.storage" {
			t.Errorf("storage %q: refused %q", bad, got)
		}
	}
	old := claim("1Gi")
	if errs := ValidatePersistentVolumeClaimUpdate(claim("2Gi"), old); len(errs) > 0 {
		t.Errorf("growing: %v", errs)
	}
	if got := refused(ValidatePersistentVolumeClaimUpdate(claim("512Mi"), old)); got != "spec.resources.requests.storage" {
		t.Errorf("shrinking refused %q", got)
	}
	retain := claim("1Gi")
	retain.Spec.PersistentVolumeReclaimPolicy = ReclaimRetain
	if got := refused(ValidatePersistentVolumeClaimUpdate(retain, old)); got != "spec" {
		t.Errorf("changing the reclaim policy refused %q", got)
	}
}

func TestValidatePodVolumes(t *testing.T) {
	pod := func(vols []Volume, mounts ...[]VolumeMount) *Pod {
		p := &Pod{Metadata: ObjectMeta{Name: "p", Namespace: "default"}, Spec: PodSpec{Volumes: vols}}
		for i, m := range mounts {
			p.Spec.Containers = append(p.Spec.Containers, Container{Name: "c" + string(rune('a'+i)), Image: "base", Command: []string{"true"}, VolumeMounts: m})
		}
		DefaultPod(p)
		return p
	}
	data := Volume{Name: "data", PersistentVolumeClaim: &PersistentVolumeClaimVolumeSource{ClaimName: "db"}}
	tmp := Volume{Name: "tmp", EmptyDir: &EmptyDirVolumeSource{SizeLimit: "64Mi"}}
	if errs := ValidatePod(pod([]Volume{data, tmp}, []VolumeMount{{Name: "data", MountPath: "/var/db"}}, []VolumeMount{{Name: "tmp", MountPath: "/tmp/x", ReadOnly: true}})); len(errs) > 0 {
		t.Fatalf("a valid pod: %v", errs)
	}
	for _, tc := range []struct {
		p    *Pod
		want string
	}{
		{pod([]Volume{data, data}, nil), "spec.volumes[1].name"},
		{pod([]Volume{{Name: "x"}}, nil), "spec.volumes[0]"},
		{pod([]Volume{{Name: "x", EmptyDir: &EmptyDirVolumeSource{}, PersistentVolumeClaim: &PersistentVolumeClaimVolumeSource{ClaimName: "db"}}}, nil), "spec.volumes[0]"},
		{pod([]Volume{{Name: "x", PersistentVolumeClaim: &PersistentVolumeClaimVolumeSource{ClaimName: "Bad_Name"}}}, nil), "spec.volumes[0].persistentVolumeClaim.claimName"},
		{pod([]Volume{{Name: "x", EmptyDir: &EmptyDirVolumeSource{SizeLimit: "huge"}}}, nil), "spec.volumes[0].emptyDir.sizeLimit"},
		{pod([]Volume{data}, []VolumeMount{{Name: "nope", MountPath: "/a"}}), "spec.containers[0].volumeMounts[0].name"},
		{pod([]Volume{data}, []VolumeMount{{Name: "data", MountPath: "a"}}), "spec.containers[0].volumeMounts[0].mountPath"},
		{pod([]Volume{data}, []VolumeMount{{Name: "data", MountPath: "/a/../b"}}), "spec.containers[0].volumeMounts[0].mountPath"},
		{pod([]Volume{data}, []VolumeMount{{Name: "data", MountPath: "/"}}), "spec.containers[0].volumeMounts[0].mountPath"},
		{pod([]Volume{data, tmp}, []VolumeMount{{Name: "data", MountPath: "/a"}}, []VolumeMount{{Name: "tmp", MountPath: "/a"}}), "spec.containers[1].volumeMounts[0].mountPath"},
	} {
		if got := refused(ValidatePod(tc.p)); got != tc.want {
			t.Errorf("%+v: refused %q, want %q", tc.p.Spec.Volumes, got, tc.want)
		}
	}
	// bhyve pods: claims are disks, named by volumeDevices; no mounts, no
	// emptyDir; other pods take no devices.
	vm := func(vols []Volume, mounts []VolumeMount, devices ...VolumeDevice) *Pod {
		p := pod(vols, mounts)
		p.Spec.RuntimeClassName = BrandBhyve
		p.Spec.Containers[0].VolumeDevices = devices
		return p
	}
	if errs := ValidatePod(vm([]Volume{data}, nil, VolumeDevice{Name: "data", DevicePath: "/dev/vdb"})); len(errs) > 0 {
		t.Errorf("a bhyve pod with a claim as a disk: %v", errs)
	}
	if errs := ValidatePod(vm([]Volume{data}, nil)); len(errs) > 0 {
		t.Errorf("a bhyve pod with a claim and no volumeDevices: %v", errs)
	}
	zone := pod([]Volume{data}, nil)
	zone.Spec.Containers[0].VolumeDevices = []VolumeDevice{{Name: "data", DevicePath: "/dev/vdb"}}
	for _, tc := range []struct {
		name string
		p    *Pod
		want string
	}{
		{"mounts in a bhyve pod", vm([]Volume{data}, []VolumeMount{{Name: "data", MountPath: "/a"}}), "spec.containers[0].volumeMounts"},
		{"emptyDir in a bhyve pod", vm([]Volume{data, tmp}, nil), "spec.volumes[1].emptyDir"},
		{"a device of an unknown volume", vm([]Volume{data}, nil, VolumeDevice{Name: "nope", DevicePath: "/dev/vdb"}), "spec.containers[0].volumeDevices[0].name"},
		{"a relative device path", vm([]Volume{data}, nil, VolumeDevice{Name: "data", DevicePath: "vdb"}), "spec.containers[0].volumeDevices[0].devicePath"},
		{"one device path twice", vm([]Volume{data}, nil, VolumeDevice{Name: "data", DevicePath: "/dev/vdb"}, VolumeDevice{Name: "data", DevicePath: "/dev/vdb"}), "spec.containers[0].volumeDevices[1].devicePath"},
		{"a device in a zone pod", zone, "spec.containers[0].volumeDevices[0]"},
	} {
		if got := refused(ValidatePod(tc.p)); got != tc.want {
			t.Errorf("%s: refused %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := pod([]Volume{data, tmp}).Spec.ClaimNames(); len(got) != 1 || got[0] != "db" {
		t.Errorf("ClaimNames = %v", got)
	}
}

func TestValidateSnapshotsAndDataSources(t *testing.T) {
	name := "db"
	s := &VolumeSnapshot{Metadata: ObjectMeta{Name: "s", Namespace: "default"}, Spec: VolumeSnapshotSpec{Source: VolumeSnapshotSource{PersistentVolumeClaimName: &name}}}
	if errs := ValidateVolumeSnapshot(s); len(errs) > 0 {
		t.Fatalf("a valid snapshot: %v", errs)
	}
	s.Spec.Source.PersistentVolumeClaimName = nil
	if got := refused(ValidateVolumeSnapshot(s)); got != "spec.source.persistentVolumeClaimName" {
		t.Errorf("a snapshot of nothing refused %q", got)
	}
	group, other := APIGroupSnapshot, "example.com"
	c := claim("1Gi")
	c.Spec.DataSource = &TypedLocalObjectReference{APIGroup: &group, Kind: KindVolumeSnapshot, Name: "s"}
	if errs := ValidatePersistentVolumeClaim(c); len(errs) > 0 {
		t.Fatalf("a claim from a snapshot: %v", errs)
	}
	c.Spec.DataSource = &TypedLocalObjectReference{APIGroup: &other, Kind: "Backup", Name: "s"}
	if got := refused(ValidatePersistentVolumeClaim(c)); got != "spec.dataSource" {
		t.Errorf("an unknown data source refused %q", got)
	}
	old := claim("1Gi")
	c.Spec.DataSource = &TypedLocalObjectReference{APIGroup: &group, Kind: KindVolumeSnapshot, Name: "s"}
	if got := refused(ValidatePersistentVolumeClaimUpdate(c, old)); got != "spec" {
		t.Errorf("adding a data source later refused %q", got)
	}
}

func TestMountPathsAreBounded(t *testing.T) {
	p := &Pod{Metadata: ObjectMeta{Name: "p", Namespace: "default"}, Spec: PodSpec{
		Volumes:    []Volume{{Name: "tmp", EmptyDir: &EmptyDirVolumeSource{}}},
		Containers: []Container{{Name: "c", Image: "base", Command: []string{"true"}, VolumeMounts: []VolumeMount{{Name: "tmp", MountPath: "/" + strings.Repeat("a", 600)}}}}}}
	DefaultPod(p)
	if got := refused(ValidatePod(p)); got != "spec.containers[0].volumeMounts[0].mountPath" {
		t.Fatalf("a 601-byte mount path refused %q", got)
	}
}
