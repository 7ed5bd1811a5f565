// Hydrogen, the whole app (login, room list, timeline, composer), as its own main.js mounts it.
import {
  Platform, RootViewModel, FeatureSet, createNavigation, createRouter,
} from "hydrogen-view-sdk";
import "hydrogen-view-sdk/theme-element-light.css";

// No olm paths: summon never joins encrypted rooms, so the session runs without end-to-end encryption.
const assetPaths = {
  downloadSandbox: "download-sandbox.html",
  worker: "main.js",
  serviceWorker: "sw.js",  // authenticated media (avatars) goes through it; without it login breaks
};

async function main() {
  const container = document.querySelector("#app");
  const platform = new Platform({container, assetPaths, config: {}, options: {development: false}});
  const navigation = createNavigation();
  platform.setNavigation(navigation);
  await platform.init();
  const urlRouter = createRouter({navigation, history: platform.history});
  urlRouter.attach();
  const features = await FeatureSet.load(platform.settingsStorage);
  const vm = new RootViewModel({platform, navigation, urlRouter, features});
  await vm.load();
  platform.createAndMountRootView(vm);
}

main().catch((e) => { document.body.dataset.failed = String(e && e.stack || e); throw e; });
