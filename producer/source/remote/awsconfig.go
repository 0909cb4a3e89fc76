package remote

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// sharedConfig is what tsock takes from the AWS shared config file
// (~/.aws/config or AWS_CONFIG_FILE) for one profile.
type sharedConfig struct {
	Region   string
	Endpoint string // endpoint_url
}

// loadSharedConfig reads profile's region and endpoint_url from the
// shared config file; a missing or unreadable file is no config, as for
// the AWS CLI.
func loadSharedConfig(profile string) sharedConfig {
	path := os.Getenv("AWS_CONFIG_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return sharedConfig{}
		}
		path = filepath.Join(home, ".aws", "config")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return sharedConfig{}
	}
	return parseSharedConfig(string(data), profile)
}

// parseSharedConfig reads the INI text of a shared config file: sections
// "[default]" and "[profile NAME]", "key = value" lines, "#" and ";"
// comments. Keys nested under a "key =" line with nothing after it
// (an s3 sub-section, say) are not profile-level and are left alone.
func parseSharedConfig(text, profile string) sharedConfig {
	if profile == "" {
		profile = "default"
	}
	var cfg sharedConfig
	inProfile, nested := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			name := strings.TrimSpace(strings.Trim(line, "[]"))
			name = strings.TrimSpace(strings.TrimPrefix(name, "profile "))
			inProfile, nested = name == profile, false
			continue
		}
		if !inProfile {
			continue
		}
		if indented := raw[0] == ' ' || raw[0] == '\t'; indented && nested {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		if nested = value == ""; nested {
			continue
		}
		switch key {
		case "region":
			cfg.Region = value
		case "endpoint_url":
			cfg.Endpoint = value
		}
	}
	return cfg
}
