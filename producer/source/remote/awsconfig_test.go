package remote

import (
	"testing"
)

func TestParseSharedConfig(t *testing.T) {
	const text = `# comment
[default]
region = eu-west-1
endpoint_url=https://default.example
[profile lab]
; another
region   =   us-east-2
s3 =
  endpoint_url = https://nested.example
  addressing_style = path
endpoint_url = http://10.0.0.5:9000
[profile other]
region = ap-south-1
`
	for profile, want := range map[string]sharedConfig{
		"":        {Region: "eu-west-1", Endpoint: "https://default.example"},
		"default": {Region: "eu-west-1", Endpoint: "https://default.example"},
		"lab":     {Region: "us-east-2", Endpoint: "http://10.0.0.5:9000"},
		"other":   {Region: "ap-south-1"},
		"missing": {},
	} {
		if got := parseSharedConfig(text, profile); got != want {
			t.Errorf("profile %q: %+v, want %+v", profile, got, want)
		}
	}
}

// FuzzSharedConfig: any text parses without a panic, and values come
// trimmed.
func FuzzSharedConfig(f *testing.F) {
	f.Add("[default]\nregion = x\n", "")
	f.Add("[profile a]\ns3 =\n  endpoint_url = y\n\t\n[", "a")
	f.Fuzz(func(t *testing.T, text, profile string) {
		got := parseSharedConfig(text, profile)
		for _, v := range []string{got.Region, got.Endpoint} {
			if v != "" && (v[0] == ' ' || v[len(v)-1] == ' ') {
				t.Fatalf("untrimmed value %q", v)
			}
		}
	})
}
