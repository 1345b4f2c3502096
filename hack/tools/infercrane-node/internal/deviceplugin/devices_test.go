package deviceplugin

import (
	"reflect"
	"strings"
	"testing"
)

func TestInventoryAdvertisesCountHealthyDevices(t *testing.T) {
	var got []string
	for _, d := range NewInventory(3).Devices() {
		got = append(got, d.ID+"="+d.Health)
	}
	want := []string{"gpu-0=Healthy", "gpu-1=Healthy", "gpu-2=Healthy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("devices = %v, want %v", got, want)
	}
}

func TestContainerEnv(t *testing.T) {
	inv := NewInventory(2)
	for _, tc := range []struct {
		ids     []string
		env     map[string]string
		problem string
	}{
		{ids: []string{"gpu-1"}, env: map[string]string{VisibleDevicesEnv: "gpu-1"}},
		{ids: []string{"gpu-1", "gpu-0"}, env: map[string]string{VisibleDevicesEnv: "gpu-1,gpu-0"}},
		{ids: []string{"gpu-0", "gpu-2"}, problem: `unknown device "gpu-2" (advertised: gpu-0,gpu-1)`},
		{ids: nil, problem: "no device requested"},
	} {
		env, err := inv.ContainerEnv(tc.ids)
		if tc.problem != "" {
			if err == nil || err.Error() != tc.problem {
				t.Errorf("ContainerEnv(%v) error = %v, want %q", tc.ids, err, tc.problem)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(env, tc.env) {
			t.Errorf("ContainerEnv(%v) = %v, %v; want %v", tc.ids, env, err, tc.env)
		}
	}
}

func TestParseArgs(t *testing.T) {
	got, err := ParseArgs([]string{"--count", "8", "--plugin-dir", "/d", "--product", "NVIDIA-L40S"})
	want := Config{ResourceName: "nvidia.com/gpu", Count: 8, PluginDir: "/d", SocketName: "infercrane-gpu.sock", Product: "NVIDIA-L40S"}
	if err != nil || got != want {
		t.Fatalf("ParseArgs = %+v, %v; want %+v", got, err, want)
	}
	for args, problem := range map[string]string{
		"--count 0":                     "--count must be at least 1, got 0",
		"--resource-name gpu":           `--resource-name must be <domain>/<name>, got "gpu"`,
		"--socket-name kubelet.sock":    `--socket-name must be a file name other than kubelet.sock, got "kubelet.sock"`,
		"--plugin-dir rel":              `--plugin-dir must be an absolute path, got "rel"`,
		"extra":                         "unexpected arguments: extra",
		"--count 0 --socket-name a/b.s": `--count must be at least 1, got 0; --socket-name must be a file name other than kubelet.sock, got "a/b.s"`,
		"--nope":                        "flag provided but not defined: -nope",
	} {
		if _, err := ParseArgs(strings.Fields(args)); err == nil || err.Error() != problem {
			t.Errorf("ParseArgs(%s) error = %v, want %q", args, err, problem)
		}
	}
}
