from setuptools import find_packages, setup

package_name = "snake_hardware"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Snake stack team",
    maintainer_email="snake-stack@example.org",
    description="Actuator backends (Dynamixel, emulator, MuJoCo) behind one interface.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
)
