"""The local stack: JVM artifacts from the install step, the KRaft broker, Spark sessions."""
