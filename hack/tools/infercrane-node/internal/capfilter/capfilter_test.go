package capfilter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// This VM's bounding set: everything up to CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE.
const vmBounding = 0x1fffeffffff

func TestBoundingReadsCapBnd(t *testing.T) {
	got, err := Bounding("Name:\tx\nCapEff:\t0000000000000000\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n")
	if err != nil || got != vmBounding {
		t.Fatalf("Bounding = %#x, %v; want %#x", got, err, uint64(vmBounding))
	}
	for _, status := range []string{"Name:\tx\n", "CapBnd:\tzz\n"} {
		if _, err := Bounding(status); err == nil {
			t.Errorf("Bounding(%q) succeeded", status)
		}
	}
}

func TestMissingNamesWhatTheMaskLacks(t *testing.T) {
	if got := Missing(vmBounding); !reflect.DeepEqual(got, map[string]bool{"CAP_SYS_RESOURCE": true}) {
		t.Fatalf("Missing(vm) = %v", got)
	}
	if got := Missing(1<<uint(len(Names)) - 1); len(got) != 0 {
		t.Fatalf("Missing(all) = %v", got)
	}
}

func TestSpecFilesOfRuncCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []SpecFile
	}{
		// As containerd's shim (go-runc) runs create and exec.
		{
			[]string{"--root", "/r", "--log", "/l.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/init.pid", "id"},
			[]SpecFile{{"/b/config.json", true}},
		},
		{
			[]string{"--root", "/r", "exec", "--process", "/tmp/runc-process1", "--detach", "--pid-file", "/p", "id"},
			[]SpecFile{{"/tmp/runc-process1", false}},
		},
		{[]string{"run", "-b=/b", "id"}, []SpecFile{{"/b/config.json", true}}},
		{[]string{"exec", "-p", "/p.json", "id"}, []SpecFile{{"/p.json", false}}},
		{[]string{"--version"}, nil},
		{[]string{"delete", "--force", "id"}, nil},
		{[]string{"create", "--bundle"}, nil},
	} {
		if got := SpecFiles(tc.args); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SpecFiles(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

const config = `{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0,"additionalGids":[4294967294]},` +
	`"args":["/sbin/init","<a&b>"],"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],` +
	`"effective":["CAP_SYS_RESOURCE","CAP_KILL"],"permitted":["CAP_CHOWN"]},"oomScoreAdj":-999},` +
	`"linux":{"resources":{"memory":{"limit":9223372036854771712}}}}`

func TestFilterDropsOnlyTheNamedCapabilitiesAndKeepsEverythingElse(t *testing.T) {
	got, changed, err := Filter([]byte(config), map[string]bool{"CAP_SYS_RESOURCE": true}, true)
	want := `{"linux":{"resources":{"memory":{"limit":9223372036854771712}}},"ociVersion":"1.0.2",` +
		`"process":{"args":["/sbin/init","<a&b>"],"capabilities":{"bounding":["CAP_CHOWN"],` +
		`"effective":["CAP_KILL"],"permitted":["CAP_CHOWN"]},"oomScoreAdj":-999,` +
		`"user":{"additionalGids":[4294967294],"gid":0,"uid":0}}}` + "\n"
	if err != nil || !changed || string(got) != want {
		t.Fatalf("Filter = %s, %v, %v\nwant %s", got, changed, err, want)
	}
}

func TestFilterOfAProcessFileAndOfSpecsWithNothingToDrop(t *testing.T) {
	process := `{"args":["sh"],"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}`
	got, changed, err := Filter([]byte(process), map[string]bool{"CAP_SYS_RESOURCE": true}, false)
	if err != nil || !changed || string(got) != `{"args":["sh"],"capabilities":{"bounding":[]}}`+"\n" {
		t.Fatalf("Filter(process) = %s, %v, %v", got, changed, err)
	}
	for _, doc := range []string{config, `{"process":{"args":["sh"]}}`, `{"ociVersion":"1.0.2"}`} {
		got, changed, err := Filter([]byte(doc), map[string]bool{"CAP_BPF": true}, true)
		if err != nil || changed || string(got) != doc {
			t.Errorf("Filter(%s) = %s, %v, %v; want it unchanged", doc, got, changed, err)
		}
	}
	if _, _, err := Filter([]byte("{"), nil, true); err == nil {
		t.Error("Filter of broken JSON succeeded")
	}
}

func TestApplyRewritesTheBundleConfigInPlaceKeepingItsMode(t *testing.T) {
	bundle := t.TempDir()
	path := filepath.Join(bundle, "config.json")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Apply([]string{"create", "--bundle", bundle, "id"}, vmBounding); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	info, _ := os.Stat(path)
	want, _, _ := Filter([]byte(config), map[string]bool{"CAP_SYS_RESOURCE": true}, true)
	if string(got) != string(want) || info.Mode().Perm() != 0o600 {
		t.Fatalf("config.json = %s (mode %v)", got, info.Mode())
	}
	if entries, _ := os.ReadDir(bundle); len(entries) != 1 {
		t.Fatalf("bundle holds %v, want only config.json", entries)
	}
	// A full bounding set, or a spec runc will not find, leaves everything alone.
	if err := Apply([]string{"create", "--bundle", filepath.Join(bundle, "gone"), "id"}, vmBounding); err != nil {
		t.Fatal(err)
	}
}
