// Boots the studio-base bundle's App the way Foxglove's own web app does: a data source list,
// an in-memory app configuration, and a layout storage holding one layout, /layout.json, under
// the id "snake" (open it with ?layoutId=snake). The data source comes from the URL
// (?ds=foxglove-websocket&ds.url=ws://...).
(async () => {
  const data = await (await fetch("/layout.json")).json();
  const layout = {
    id: "snake", name: "snake", permission: "CREATOR_WRITE",
    baseline: { data, savedAt: undefined }, working: undefined, syncInfo: undefined,
  };
  const layoutStorage = {
    list: async () => [layout],
    get: async (_namespace, id) => (id === layout.id ? layout : undefined),
    put: async (_namespace, saved) => saved,
    delete: async () => {},
    importLayouts: async () => {},
  };
  const values = new Map();
  const appConfiguration = {
    get: (key) => values.get(key),
    set: async (key, value) => { values.set(key, value); },
    addChangeListener: () => {},
    removeChangeListener: () => {},
  };
  await self.initI18n();
  ReactDOM.render(React.createElement(self.App, {
    deepLinks: [location.href],
    appConfiguration,
    layoutStorage,
    extensionLoaders: [],
    dataSources: [new self.FoxgloveWebSocketDataSourceFactory(), new self.RemoteDataSourceFactory()],
    enableGlobalCss: true,
  }), document.getElementById("root"));
  window.snakeBooted = true;
})().catch((err) => { window.snakeBootError = String(err && err.stack || err); });
