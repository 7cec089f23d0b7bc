#!/usr/bin/env bash
# Builds Apicurio Registry (io.apicurio:apicurio-registry-app from Maven
# Central; Confluent-compatible REST API at /apis/ccompat/v6, in-memory H2
# storage), the schema registry the tests start (tests/schema_registry_server.py),
# and prints where it is:
#
#   bash ci/schema-registry.sh     # build (the first run downloads: about 2 minutes), then print:
#   KCODEC_SCHEMA_REGISTRY_JAR=<the registry's runner jar>
#
# Maven Central publishes the registry as a plain jar of classes, not as a
# runnable Quarkus application: a small pom written here depends on it and
# lets quarkus-maven-plugin build the runner jar (with its lib/ beside it) in
# the cache. A later run whose pom did not change and whose jar is still
# there does nothing but print it.
#
# Why 2.1.5.Final: the newer releases on Maven Central cannot be built from it.
# 3.3.3 and 2.6.13.Final depend on apicurio-registry-schema-util-provider of
# their own version, which Central does not serve (3.3.3's schema-util-*
# modules are all missing too); 2.4.2.Final needs the Quarkus extension
# apicurio-common-app-components-config-index-deployment 0.1.18.Final, also
# not served. 2.1.5.Final resolves whole once the JSON Schema validator
# (com.github.everit-org.json-schema, on JitPack only) is replaced by the
# same library's release on Central (com.github.erosb:everit-json-schema).
set -euo pipefail
version=${KCODEC_SCHEMA_REGISTRY_VERSION:-2.1.5.Final}
quarkus_version=2.2.3.Final     # the Quarkus that Apicurio $version was built with
cache=${KCODEC_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcodec/kafka}
project=$cache/schema-registry-$version
jar=$project/target/schema-registry-runner.jar

for tool in java mvn; do
    if ! command -v "$tool" >/dev/null; then
        echo "schema-registry.sh: $tool is not installed (ci/system-tools.sh installs it)" >&2
        exit 1
    fi
done

mkdir -p "$project"
pom=$project/pom.xml
cat >"$pom.new" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- written by kcodec's ci/schema-registry.sh: Apicurio Registry $version as a runnable jar -->
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kcodec.test</groupId>
  <artifactId>schema-registry</artifactId>
  <version>1</version>
  <packaging>jar</packaging>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>io.apicurio</groupId>
        <artifactId>apicurio-registry</artifactId>
        <version>$version</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>io.apicurio</groupId>
      <artifactId>apicurio-registry-app</artifactId>
      <version>$version</version>
      <exclusions>
        <exclusion>
          <groupId>com.github.everit-org.json-schema</groupId>
          <artifactId>org.everit.json.schema</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>com.github.erosb</groupId>
      <artifactId>everit-json-schema</artifactId>
      <version>1.14.2</version>
    </dependency>
  </dependencies>
  <build>
    <finalName>schema-registry</finalName>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <executions>
          <execution>
            <id>registry-config</id>
            <phase>generate-resources</phase>
            <goals><goal>unpack</goal></goals>
            <configuration>
              <artifactItems>
                <artifactItem>
                  <groupId>io.apicurio</groupId>
                  <artifactId>apicurio-registry-app</artifactId>
                  <version>$version</version>
                  <includes>application.properties</includes>
                  <outputDirectory>\${project.build.outputDirectory}</outputDirectory>
                </artifactItem>
              </artifactItems>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>io.quarkus</groupId>
        <artifactId>quarkus-maven-plugin</artifactId>
        <version>$quarkus_version</version>
        <executions>
          <execution>
            <goals><goal>build</goal></goals>
            <configuration>
              <properties>
                <quarkus.index-dependency.registry.group-id>io.apicurio</quarkus.index-dependency.registry.group-id>
                <quarkus.index-dependency.registry.artifact-id>apicurio-registry-app</quarkus.index-dependency.registry.artifact-id>
              </properties>
            </configuration>
          </execution>
        </executions>
      </plugin>
    </plugins>
  </build>
</project>
EOF
mv "$pom.new" "$pom"

sum=$(sha256sum "$pom" | cut -d' ' -f1)
stamp=$project/pom-sha256
libs=$project/lib.list
all_present() {
    [[ -f $jar && -f $stamp && $(cat "$stamp") == "$sum" && -s $libs ]] || return 1
    local lib
    while read -r lib; do
        [[ -f $project/target/lib/$lib ]] || return 1
    done <"$libs"
}

if ! all_present; then
    echo "== building Apicurio Registry $version (Maven; the first time about 2 minutes)" >&2
    log=$cache/schema-registry.mvn.log
    rm -f "$stamp"
    # offline first: quick when Maven's repository already holds everything
    if ! mvn -B -q -o -f "$pom" package -DskipTests >"$log" 2>&1; then
        if ! mvn -B -q -f "$pom" package -DskipTests >"$log" 2>&1 || [[ ! -f $jar ]]; then
            cat "$log" >&2
            echo "schema-registry.sh: could not build Apicurio Registry $version" >&2
            exit 1
        fi
    fi
    ls "$project/target/lib" >"$libs"
    echo "$sum" >"$stamp"
fi
echo "KCODEC_SCHEMA_REGISTRY_JAR=$jar"
